// DevicePrefetcher: worker thread -> pinned ring -> H2D copy on the copy stream -> the compute stream's reads.
#include "data/prefetch.h"

#include <cstdio>

#include "core/cuda_runtime.h"
#include "core/transfer.h"

namespace ember::data {

DevicePrefetcher::DevicePrefetcher(Device device, int64_t slot_bytes, bool pinned, Gather gather)
    : device_(device), pinned_(pinned), gather_(std::move(gather)), copy_stream_(cuda::Stream::copy(device)),
      compute_stream_(cuda::Stream::compute(device)) {
  cuda::runtime::set_device(device.index);
  for (int k = 0; k < kRing; ++k) {
    host_[k] = Tensor::empty({slot_bytes}, DType::U8, Device::cpu(), pinned);
    staging_[k] = Tensor::empty({slot_bytes}, DType::U8, device);
  }
  worker_ = std::thread([this] { worker_loop(); });
}

DevicePrefetcher::~DevicePrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
  // Buffers go back to their allocators only after the copies that write them and the reads that use them are
  // done: another loader may get the same memory next.
  try {
    for (int k = 0; k < kRing; ++k) {
      copied_[k].synchronize();
      read_[k].synchronize();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember: warning: DataLoader shutdown: %s\n", e.what());
  }
}

void DevicePrefetcher::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  try {
    cuda::runtime::set_device(device_.index);
  } catch (...) {
    error_ = std::current_exception();
  }
  for (;;) {
    changed_.wait(lock, [&] {
      return stop_ || (!paused_ && !error_ && next_fill_ < batches_ && state_[next_fill_ % kRing] == SlotState::Free);
    });
    if (stop_) return;
    const int64_t b = next_fill_;
    const int k = static_cast<int>(b % kRing);
    state_[k] = SlotState::Filling;
    filling_ = true;
    lock.unlock();
    std::exception_ptr failure;
    int64_t bytes = 0;
    try {
      copied_[k].synchronize();  // the previous async copy out of this slot must be done before it is overwritten
      bytes = gather_(b, host_[k].data<uint8_t>());
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    filling_ = false;
    state_[k] = failure ? SlotState::Free : SlotState::Filled;
    if (failure) error_ = failure;
    else slot_batch_[k] = b, slot_bytes_[k] = bytes, ++next_fill_;
    changed_.notify_all();
  }
}

void DevicePrefetcher::restart(int64_t batches) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    paused_ = true;  // the worker finishes the batch it is gathering, then waits
    changed_.wait(lock, [&] { return !filling_; });
    for (SlotState& s : state_) s = SlotState::Free;  // drop batches gathered for the old epoch
    batches_ = batches;
    next_fill_ = 0;
    copies_issued_ = 0;
    error_ = nullptr;
    paused_ = false;
  }
  changed_.notify_all();
}

// Queues the H2D copy of batch `b` from its host slot; with !wait only if the worker already filled it.
// Returns whether the copy was queued.
bool DevicePrefetcher::issue_copy(int64_t b, bool wait) {
  const int k = static_cast<int>(b % kRing);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    auto ready = [&] { return state_[k] == SlotState::Filled && slot_batch_[k] == b; };
    if (wait) changed_.wait(lock, [&] { return error_ || ready(); });
    if (error_) {
      if (!wait) return false;
      std::exception_ptr e = error_;
      lock.unlock();
      std::rethrow_exception(e);
    }
    if (!ready()) return false;
    staged_bytes_[k] = slot_bytes_[k];
  }
  copy_stream_.wait(read_[k]);  // the device slot is free once the compute stream's last use of it is done
  transfer({staging_[k].raw_data(), device_, false}, {host_[k].raw_data(), Device::cpu(), pinned_},
           static_cast<size_t>(staged_bytes_[k]), /*non_blocking=*/pinned_, "data_loader", &copy_stream_);
  copied_[k].record(copy_stream_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state_[k] = SlotState::Free;  // the worker waits for copied_[k] before refilling it
  }
  changed_.notify_all();
  ++copies_issued_;
  return true;
}

void DevicePrefetcher::consume(int64_t b, const std::function<void(const Tensor&)>& use) {
  const int k = static_cast<int>(b % kRing);
  cuda::runtime::set_device(device_.index);
  if (copies_issued_ == b) issue_copy(b, /*wait=*/true);
  EMBER_ASSERT(copies_issued_ > b, "batch ", b, " has no queued copy");
  compute_stream_.wait(copied_[k]);
  use(staging_[k].slice(0, 0, staged_bytes_[k]));
  read_[k].record(compute_stream_);
  // Queue the next batch's copy now, ahead of this batch's compute, so the two overlap.
  if (pinned_ && b + 1 < batches_) issue_copy(b + 1, /*wait=*/false);
}

}  // namespace ember::data
