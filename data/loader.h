// DataLoader: seeded shuffled batches of a host Dataset as f32 inputs and int64 labels on a device, shaped as the
// model takes them, with pinned, asynchronous, overlapped host-to-device copies on CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "data/dataset.h"

namespace ember::data {

// u8 pixels -> f32 in [0, 1]: the one scale of ember's image inputs.
inline constexpr double kPixelScale = 1.0 / 255.0;

struct DataLoaderOptions {
  int64_t batch_size = 128;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;  // drop the last partial batch of an epoch
  Device device = Device::cpu();
  // CUDA only: page-locked staging buffers and async copies; false (--no-pin) gives pageable
  // buffers and synchronous copies, which is what the benchmark compares.
  bool pin_memory = true;
  // One sample as the model takes it (models::Architecture::sample_shape()): x is (B, *sample_shape). Empty: each
  // image flattened to (H*W). Its element count must be the dataset's sample size.
  Shape sample_shape = {};
  // Data-parallel training: every shard sees the same epoch order and batches of batch_size samples (the global
  // batch), and takes its own contiguous part of each (data/sampler.h).
  int64_t shard_rank = 0;
  int64_t shard_count = 1;
};

struct Batch {
  Tensor x;           // (B, *sample_shape) float32 in [0, 1], on the loader's device
  Tensor y;           // (B) int64, on the loader's device
  Tensor positions;   // a masked LM's batch (data/text.h): y's positions in x (M) int64 as b * T + t; else undefined
  int64_t index = 0;  // batch number within the epoch
  int64_t global_size = 0;  // rows of the whole batch over every shard (size() without sharding)
  int64_t size() const { return y.defined() ? y.size(0) : 0; }
};

// images (N, H, W) u8 on the host as a model input: (N, *sample_shape) f32 on `device`, scaled as batches are.
Tensor images_to_input(const Tensor& images, const Shape& sample_shape, Device device);

// Usage: for each epoch: loader.start_epoch(epoch); while (loader.next(batch)) train(batch.x, batch.y);
//
// Each batch is a tensor of its own from the allocators' caches (nothing is allocated from the system per step,
// and a batch the caller keeps stays intact). On CUDA the batch is ready in stream order: work queued on the
// device's compute stream may use it at once.
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
