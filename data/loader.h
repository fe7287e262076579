// DataLoader: seeded shuffled batches of a host Dataset as f32 images and int64 labels on a device,
// with pinned, asynchronous, overlapped host-to-device copies on CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "data/dataset.h"

namespace ember::data {

struct DataLoaderOptions {
  int64_t batch_size = 128;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;  // drop the last partial batch of an epoch
  Device device = Device::cpu();
  // CUDA only: page-locked staging buffers and async copies; false (--no-pin) gives pageable
  // buffers and synchronous copies, which is what the benchmark compares.
  bool pin_memory = true;
  bool flatten = true;  // x is (B, H*W); else (B, H, W)
  // Data-parallel training: every shard sees the same epoch order and batches of batch_size samples
  // (the global batch), and takes its own contiguous part of each: rows [b*r/R, b*(r+1)/R) of a batch of
  // b rows for shard r of R (PyTorch's DistributedSampler splits by sample instead; this keeps the
  // global batch the step of a single process, so R shards sum to exactly its gradient).
  int64_t shard_rank = 0;
  int64_t shard_count = 1;
};

struct Batch {
  Tensor x;           // (B, H*W) or (B, H, W) float32 in [0, 1], on the loader's device
  Tensor y;           // (B) int64, on the loader's device
  int64_t index = 0;  // batch number within the epoch
  int64_t global_size = 0;  // rows of the whole batch over every shard (size() without sharding)
  int64_t size() const { return y.defined() ? y.size(0) : 0; }
};

// The order of epoch `epoch`: a permutation of 0..n-1 by Fisher-Yates over Philox4x32-10 keyed
// by (seed, epoch). Defined bit for bit (no std::shuffle), so it is the same on every platform.
void epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, std::vector<int64_t>& order);

// Usage: for each epoch: loader.start_epoch(epoch); while (loader.next(batch)) train(batch.x, batch.y);
//
// Batches are views of a ring of buffers allocated once: when the caller drops each batch (the
// usual loop) nothing is allocated per step; a buffer still referenced (a kept batch) is replaced
// instead of overwritten, so a kept batch stays intact. On CUDA the batch is ready in stream
// order: work queued on the device's compute stream may use it at once.
class DataLoader {
 public:
  // Keeps a handle to the dataset's tensors (no copy). Throws on an invalid dataset or options,
  // DeviceUnavailableError for a CUDA device this machine lacks.
  DataLoader(const Dataset& dataset, DataLoaderOptions options);
  ~DataLoader();  // stops the prefetch thread; never throws
  DataLoader(DataLoader&&) noexcept;
  DataLoader& operator=(DataLoader&&) noexcept;
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Begins epoch `epoch` (any epoch, in any order; an unfinished epoch is abandoned).
  void start_epoch(int64_t epoch);
  // Fills `batch` with the next batch of the epoch; false when the epoch is done. Starts epoch 0
  // when no epoch was started. Rethrows errors of the prefetch thread.
  bool next(Batch& batch);

  int64_t batches_per_epoch() const;
  int64_t samples_per_epoch() const;  // N, or N rounded down to whole batches with drop_last
  int64_t epoch() const;
  // Sample indices of the current epoch in batch order.
  const std::vector<int64_t>& order() const;
  const DataLoaderOptions& options() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::data
