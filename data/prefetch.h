// The CUDA side of the DataLoader (internal to data/): a worker thread gathers each batch's u8 images and labels
// into a ring of pinned host slots; the H2D copy of a slot runs on the device's copy stream, ordered before the
// compute stream's use of it by an event, so the next batch's copy overlaps this batch's compute.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "core/stream.h"
#include "core/tensor.h"

namespace ember::data {

class DevicePrefetcher {
 public:
  // Writes batch `b`'s bytes (its rows' images, then their labels) to `dst` and returns how many; runs on the
  // worker thread.
  using Gather = std::function<int64_t(int64_t b, uint8_t* dst)>;

  // Slots of `slot_bytes` on the host (pinned, or pageable with synchronous copies) and on `device`.
  DevicePrefetcher(Device device, int64_t slot_bytes, bool pinned, Gather gather);
  ~DevicePrefetcher();  // stops the worker, then waits for the device's use of the slots; never throws
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  // A new epoch of `batches` batches: what was gathered for the old one is dropped, gathering starts at batch 0.
  void restart(int64_t batches);
  // Batch `b`'s bytes on the device, ready in the compute stream's order; `use` queues the compute stream's
  // reading of them. Afterwards batch b + 1's copy is queued if it is gathered already (pinned only).
  // Rethrows an error of the worker thread.
  void consume(int64_t b, const std::function<void(const Tensor& on_device)>& use);

 private:
  enum class SlotState { Free, Filling, Filled };
  static constexpr int kRing = 3;  // slots: one being filled by the worker, one being copied, one being computed on

  void worker_loop();
  bool issue_copy(int64_t b, bool wait);

  Device device_;
  bool pinned_;
  Gather gather_;
  cuda::Stream copy_stream_, compute_stream_;
  Tensor host_[kRing], staging_[kRing];  // u8 slots on the host and on the device
  cuda::Event copied_[kRing];  // on the copy stream, after the H2D copy of the slot
  cuda::Event read_[kRing];    // on the compute stream, after its last use of the device slot
  int64_t batches_ = 0;
  int64_t copies_issued_ = 0;  // batches [0, copies_issued_) of this epoch have their copy queued
  int64_t staged_bytes_[kRing] = {};  // bytes copied into each device slot (the caller's thread alone)

  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  SlotState state_[kRing] = {SlotState::Free, SlotState::Free, SlotState::Free};
  int64_t slot_batch_[kRing] = {};
  int64_t slot_bytes_[kRing] = {};  // what the gather wrote into each host slot (under the mutex)
  int64_t next_fill_ = 0;
  bool paused_ = true, stop_ = false, filling_ = false;
  std::exception_ptr error_;
};

}  // namespace ember::data
