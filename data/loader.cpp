// DataLoader: the epoch permutation, the cpu gather, and the CUDA pipeline (worker thread -> pinned
// ring -> H2D copy on the copy stream -> u8->f32 cast on the compute stream).
#include "data/loader.h"

#include <algorithm>
#include <bit>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/cuda_runtime.h"
#include "base/error.h"
#include "core/ops.h"
#include "core/transfer.h"
#include "kernels/copy.h"
#include "kernels/cpu/parallel.h"
#include "kernels/philox.h"

namespace ember::data {

namespace rt = cuda::runtime;
using detail::concat;

namespace {

// Slots per ring: one being filled by the worker, one being copied, one being computed on.
constexpr int kRing = 3;
// The same float scale kernels::{cpu,cuda}::cast use for u8 -> f32, so cpu and cuda batches are
// bitwise identical.
constexpr float kInv255 = static_cast<float>(1.0 / 255.0);

// How far ahead the host gather asks for rows (see gather_to_host), and the request for one row's cache lines.
constexpr int64_t kPrefetchRows = 4;
void prefetch_row(const uint8_t* row, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off);
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// 64-bit draws from Philox4x32-10 under a key mixed from (seed, epoch).
class EpochRandom {
 public:
  EpochRandom(uint64_t seed, int64_t epoch) : key_(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch)))) {}
  // Uniform in [0, bound) for bound >= 1: rejection on a power-of-two mask, unbiased and fully
  // specified (std::uniform_int_distribution is implementation-defined).
  uint64_t below(uint64_t bound) {
    const uint64_t mask = std::bit_ceil(bound) - 1;
    uint64_t r;
    do r = next() & mask;
    while (r >= bound);
    return r;
  }

 private:
  uint64_t next() {
    kernels::Philox4 w = kernels::philox4x32_10(counter_++, key_);
    return (static_cast<uint64_t>(w.v[0]) << 32) | w.v[1];
  }
  uint64_t key_;
  uint64_t counter_ = 0;
};

// Owns a CUDA event (created lazily by the CUDA pipeline only).
struct Event {
  void* handle = nullptr;
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (handle) rt::event_destroy(handle);
  }
};

}  // namespace

void epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, std::vector<int64_t>& order) {
  EMBER_CHECK(n >= 0, ValueError, "epoch_permutation(): n must be >= 0, got ", n);
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  EpochRandom random(seed, epoch);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(random.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
}

struct DataLoader::Impl {
  Dataset data;
  DataLoaderOptions opt;
  int64_t n = 0;             // samples in the dataset
  int64_t sample_bytes = 0;  // H * W
  Shape sample_shape;        // (H, W)
  int64_t num_batches = 0;
  std::vector<int64_t> order;
  int64_t epoch = 0;
  bool started = false;
  int64_t next_batch = 0;  // the batch next() hands out next

  // Output ring on the target device: x (B, H*W) f32, y (B) int64.
  Tensor out_x[kRing], out_y[kRing];

  // ---- CUDA pipeline ----
  bool on_cuda = false;
  bool pinned = false;
  int device_index = 0;
  kernels::Stream copy_stream = nullptr, compute_stream = nullptr;
  // Per slot: B images then B labels, all u8 (B * (H*W + 1) bytes), on the host and on the device.
  Tensor host_slot[kRing], staging[kRing];
  Event copy_done[kRing];  // recorded on the copy stream after the H2D copy of the slot
  Event cast_done[kRing];  // recorded on the compute stream after the casts read the slot
  bool copy_recorded[kRing] = {};
  bool cast_recorded[kRing] = {};
  int64_t copies_issued = 0;  // batches [0, copies_issued) of this epoch have their copy queued

  // ---- worker thread (gathers batches into host slots) ----
  enum class SlotState { Free, Filling, Filled };
  std::thread worker;
  std::mutex mutex;
  std::condition_variable changed;
  SlotState state[kRing] = {SlotState::Free, SlotState::Free, SlotState::Free};
  int64_t slot_batch[kRing] = {};
  int64_t next_fill = 0;
  bool paused = true, stop = false, filling = false;
  std::exception_ptr error;

  Impl(const Dataset& dataset, DataLoaderOptions options);
  ~Impl();

  // Batch `batch` of the epoch is order[batch * batch_size, + global_rows); this shard takes its contiguous part.
  int64_t global_rows(int64_t batch) const { return std::min(opt.batch_size, n - batch * opt.batch_size); }
  int64_t shard_begin(int64_t batch) const { return global_rows(batch) * opt.shard_rank / opt.shard_count; }
  int64_t rows_in(int64_t batch) const {
    return global_rows(batch) * (opt.shard_rank + 1) / opt.shard_count - shard_begin(batch);
  }
  int64_t first_row(int64_t batch) const { return batch * opt.batch_size + shard_begin(batch); }
  void start_epoch(int64_t e);
  bool next(Batch& batch);
  void gather_to_host(int64_t batch, float* x, int64_t* y) const;
  void gather_packed(int64_t batch, uint8_t* dst) const;
  void ensure_output_slot(int k);
  bool issue_copy(int64_t batch, bool wait);
  void worker_loop();
};

DataLoader::Impl::Impl(const Dataset& dataset, DataLoaderOptions options) : data(dataset), opt(options) {
  data.check();
  EMBER_CHECK(opt.batch_size >= 1, ValueError, "DataLoader: batch_size must be >= 1, got ", opt.batch_size);
  EMBER_CHECK(opt.shard_count >= 1 && opt.shard_rank >= 0 && opt.shard_rank < opt.shard_count, ValueError,
              "DataLoader: shard ", opt.shard_rank, " of ", opt.shard_count, " does not exist (need 0 <= rank < count)");
  EMBER_CHECK(!opt.device.is_meta(), ValueError,
              "DataLoader: cannot load batches onto the meta device (it has no memory); use cpu or cuda");
  n = data.size();
  sample_bytes = data.sample_numel();
  sample_shape.assign(data.images.shape().begin() + 1, data.images.shape().end());
  num_batches = opt.drop_last ? n / opt.batch_size : (n + opt.batch_size - 1) / opt.batch_size;
  // Labels cross the bus as bytes next to their images (one copy per batch).
  const int64_t* labels = data.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    EMBER_CHECK(labels[i] >= 0 && labels[i] <= 255, ValueError, "DataLoader: label ", labels[i], " of sample ", i,
                " is outside 0..255 (class indices are expected)");
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});

  if (opt.device.is_cuda()) cuda::require(opt.device);
  const int64_t B = opt.batch_size;
  for (int k = 0; k < kRing; ++k) {
    out_x[k] = Tensor::empty({B, sample_bytes}, DType::F32, opt.device);
    out_y[k] = Tensor::empty({B}, DType::I64, opt.device);
  }
  if (!opt.device.is_cuda()) return;

  on_cuda = true;
  pinned = opt.pin_memory;
  device_index = opt.device.index;
  rt::set_device(device_index);
  copy_stream = rt::copy_stream(device_index);
  compute_stream = rt::compute_stream(device_index);
  int64_t slot_bytes = 0;
  EMBER_CHECK(!__builtin_mul_overflow(B, sample_bytes + 1, &slot_bytes), ValueError, "DataLoader: batch_size ", B,
              " is too large");
  for (int k = 0; k < kRing; ++k) {
    host_slot[k] = Tensor::empty({slot_bytes}, DType::U8, Device::cpu(), pinned);
    staging[k] = Tensor::empty({slot_bytes}, DType::U8, opt.device);
    copy_done[k].handle = rt::event_create();
    cast_done[k].handle = rt::event_create();
  }
  worker = std::thread([this] { worker_loop(); });
}

DataLoader::Impl::~Impl() {
  if (worker.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    changed.notify_all();
    worker.join();
  }
  if (!on_cuda) return;
  // Buffers go back to their allocators only after the copies that write them and the casts
  // that read them are done: another loader may get the same memory next.
  try {
    for (int k = 0; k < kRing; ++k) {
      if (copy_recorded[k]) rt::event_synchronize(copy_done[k].handle);
      if (cast_recorded[k]) rt::event_synchronize(cast_done[k].handle);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember: warning: DataLoader shutdown: %s\n", e.what());
  }
}

void DataLoader::Impl::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex);
  try {
    rt::set_device(device_index);
  } catch (...) {
    error = std::current_exception();
  }
  for (;;) {
    changed.wait(lock, [&] {
      return stop || (!paused && !error && next_fill < num_batches && state[next_fill % kRing] == SlotState::Free);
    });
    if (stop) return;
    const int64_t j = next_fill;
    const int k = static_cast<int>(j % kRing);
    const bool wait_for_copy = copy_recorded[k];
    state[k] = SlotState::Filling;
    filling = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      // The previous async copy out of this pinned slot must be done before it is overwritten.
      if (wait_for_copy) rt::event_synchronize(copy_done[k].handle);
      gather_packed(j, host_slot[k].data<uint8_t>());
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    filling = false;
    if (failure) {
      error = failure;
      state[k] = SlotState::Free;
    } else {
      state[k] = SlotState::Filled;
      slot_batch[k] = j;
      ++next_fill;
    }
    changed.notify_all();
  }
}

void DataLoader::Impl::gather_packed(int64_t batch, uint8_t* dst) const {
  const uint8_t* images = data.images.data<uint8_t>();
  const int64_t* labels = data.labels.data<int64_t>();
  const int64_t rows = rows_in(batch), first = first_row(batch);
  uint8_t* label_dst = dst + rows * sample_bytes;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t s = order[first + i];
    std::memcpy(dst + i * sample_bytes, images + s * sample_bytes, static_cast<size_t>(sample_bytes));
    label_dst[i] = static_cast<uint8_t>(labels[s]);
  }
}

void DataLoader::Impl::gather_to_host(int64_t batch, float* x, int64_t* y) const {
  const uint8_t* images = data.images.data<uint8_t>();
  const int64_t* labels = data.labels.data<int64_t>();
  const int64_t rows = rows_in(batch), first = first_row(batch), d = sample_bytes;
  // Rows are independent: the host pool gathers them in chunks (the same bytes at any thread count).
  const int64_t grain = std::max<int64_t>(1, kernels::cpu::kElementwiseGrain / std::max<int64_t>(1, d));
  kernels::cpu::parallel_chunks(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // Rows sit at random places in a 47 MB array: ask for a later row's lines while this one converts,
      // or every row waits on memory (the loop took 6% of a batch-512 step without this).
      if (i + kPrefetchRows < end) prefetch_row(images + order[first + i + kPrefetchRows] * d, d);
      const int64_t s = order[first + i];
      const uint8_t* src = images + s * d;
      float* row = x + i * d;
      for (int64_t p = 0; p < d; ++p) row[p] = static_cast<float>(src[p]) * kInv255;
      y[i] = labels[s];
    }
  });
}

void DataLoader::Impl::ensure_output_slot(int k) {
  // A slot someone still holds (a kept batch) is replaced, never overwritten under them.
  if (out_x[k].storage().use_count() > 1) out_x[k] = Tensor::empty(out_x[k].shape(), DType::F32, opt.device);
  if (out_y[k].storage().use_count() > 1) out_y[k] = Tensor::empty(out_y[k].shape(), DType::I64, opt.device);
}

void DataLoader::Impl::start_epoch(int64_t e) {
  if (on_cuda) {
    std::unique_lock<std::mutex> lock(mutex);
    paused = true;  // the worker finishes the batch it is gathering, then waits
    changed.wait(lock, [&] { return !filling; });
  }
  if (opt.shuffle) epoch_permutation(n, opt.seed, e, order);  // reuses order's memory
  epoch = e;
  started = true;
  next_batch = 0;
  copies_issued = 0;
  if (on_cuda) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (SlotState& s : state) s = SlotState::Free;  // drop batches gathered for the old epoch
      next_fill = 0;
      error = nullptr;
      paused = false;
    }
    changed.notify_all();
  }
}

// Queues the H2D copy of `batch` from its host slot; with !wait only if the worker already
// filled it. Returns whether the copy was queued.
bool DataLoader::Impl::issue_copy(int64_t batch, bool wait) {
  const int k = static_cast<int>(batch % kRing);
  {
    std::unique_lock<std::mutex> lock(mutex);
    auto ready = [&] { return state[k] == SlotState::Filled && slot_batch[k] == batch; };
    if (wait) changed.wait(lock, [&] { return error || ready(); });
    if (error) {
      if (!wait) return false;
      std::exception_ptr e = error;
      lock.unlock();
      std::rethrow_exception(e);
    }
    if (!ready()) return false;
  }
  // The staging slot is free once the casts of the batch that last used it are done.
  if (cast_recorded[k]) rt::stream_wait_event(copy_stream, cast_done[k].handle);
  const size_t bytes = static_cast<size_t>(rows_in(batch) * (sample_bytes + 1));
  transfer({staging[k].raw_data(), opt.device, false}, {host_slot[k].raw_data(), Device::cpu(), pinned}, bytes,
           /*non_blocking=*/pinned, "data_loader", copy_stream);
  rt::event_record(copy_done[k].handle, copy_stream);
  {
    std::lock_guard<std::mutex> lock(mutex);
    copy_recorded[k] = true;
    state[k] = SlotState::Free;  // the worker syncs on copy_done[k] before refilling it
  }
  changed.notify_all();
  ++copies_issued;
  return true;
}

bool DataLoader::Impl::next(Batch& batch) {
  if (!started) start_epoch(0);
  batch.x = Tensor();  // let go of the caller's previous batch so its slot can be reused
  batch.y = Tensor();
  if (next_batch >= num_batches) return false;
  const int64_t j = next_batch;
  const int k = static_cast<int>(j % kRing);
  const int64_t rows = rows_in(j);
  ensure_output_slot(k);
  if (!on_cuda) {
    gather_to_host(j, out_x[k].data<float>(), out_y[k].data<int64_t>());
  } else {
#if EMBER_HAS_CUDA
    rt::set_device(device_index);
    if (copies_issued == j) issue_copy(j, /*wait=*/true);
    EMBER_ASSERT(copies_issued > j, "batch ", j, " has no queued copy");
    // Scale on the device: u8 crossed the bus (4x fewer bytes than f32).
    rt::stream_wait_event(compute_stream, copy_done[k].handle);
    // ops run on the compute stream, which now waits for the copy.
    Tensor images = staging[k].slice(0, 0, rows * sample_bytes), labels = staging[k].slice(0, rows * sample_bytes, rows * (sample_bytes + 1));
    Tensor x_rows = out_x[k].slice(0, 0, rows), y_rows = out_y[k].slice(0, 0, rows);
    ops::cast_(x_rows, images, 1.0 / 255.0);
    ops::cast_(y_rows, labels, 1.0);
    rt::event_record(cast_done[k].handle, compute_stream);
    cast_recorded[k] = true;
    // Queue the next batch's copy now, ahead of this batch's compute, so the two overlap.
    if (pinned && j + 1 < num_batches) issue_copy(j + 1, /*wait=*/false);
#else
    cuda::require(opt.device);
#endif
  }
  Tensor x = rows == opt.batch_size ? out_x[k] : out_x[k].slice(0, 0, rows);
  Tensor y = rows == opt.batch_size ? out_y[k] : out_y[k].slice(0, 0, rows);
  if (!opt.flatten) {
    Shape shape = {rows};
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
    x = x.view(shape);
  }
  batch.x = std::move(x);
  batch.y = std::move(y);
  batch.index = j;
  batch.global_size = global_rows(j);
  ++next_batch;
  return true;
}

DataLoader::DataLoader(const Dataset& dataset, DataLoaderOptions options)
    : impl_(std::make_unique<Impl>(dataset, options)) {}
DataLoader::~DataLoader() = default;
DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&&) noexcept = default;

void DataLoader::start_epoch(int64_t epoch) { impl_->start_epoch(epoch); }
bool DataLoader::next(Batch& batch) { return impl_->next(batch); }
int64_t DataLoader::batches_per_epoch() const { return impl_->num_batches; }
int64_t DataLoader::samples_per_epoch() const {
  return impl_->opt.drop_last ? impl_->num_batches * impl_->opt.batch_size : impl_->n;
}
int64_t DataLoader::epoch() const { return impl_->epoch; }
const std::vector<int64_t>& DataLoader::order() const { return impl_->order; }
const DataLoaderOptions& DataLoader::options() const { return impl_->opt; }

}  // namespace ember::data
