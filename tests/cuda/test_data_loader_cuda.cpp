// DataLoader on a real GPU: batches bitwise equal to the cpu loader's (pinned and pageable), the
// ledger's exact H2D copies of u8 bytes, no per-step device allocations, abandoned epochs.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/ops.h"
#include "core/storage.h"
#include "core/transfer_ledger.h"
#include "data/loader.h"

using namespace ember;
using namespace ember::data;

namespace {

const Device kGpu = Device::cuda(0);
TransferStats stats(TransferDirection d) { return TransferLedger::global().stats(d); }

Dataset synthetic(int64_t n) {
  Dataset data;
  data.images = Tensor::empty({n, 28, 28}, DType::U8);
  data.labels = Tensor::empty({n}, DType::I64);
  uint8_t* px = data.images.data<uint8_t>();
  int64_t* y = data.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < 784; ++p) px[i * 784 + p] = static_cast<uint8_t>((i * 131 + p * 17 + (i * p) % 7) % 256);
    y[i] = (i * 3) % 10;
  }
  return data;
}

DataLoaderOptions options(Device device, int64_t batch_size, bool pin, bool drop_last = false) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.seed = 2024;
  o.device = device;
  o.pin_memory = pin;
  o.drop_last = drop_last;
  return o;
}

struct HostBatch {
  std::vector<float> x;
  std::vector<int64_t> y;
  Shape shape;
};

std::vector<HostBatch> cpu_epoch(const Dataset& data, DataLoaderOptions o, int64_t epoch) {
  o.device = Device::cpu();
  DataLoader loader(data, o);
  loader.start_epoch(epoch);
  std::vector<HostBatch> out;
  Batch b;
  while (loader.next(b)) out.push_back({b.x.to_vector<float>(), b.y.to_vector<int64_t>(), b.x.shape()});
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("DataLoader on cuda gives the cpu loader's batches bit for bit", "[cuda]") {
  Dataset data = synthetic(1037);
  for (bool pin : {true, false}) {
    for (bool drop_last : {false, true}) {
      INFO("pin_memory " << pin << ", drop_last " << drop_last);
      DataLoader loader(data, options(kGpu, 64, pin, drop_last));
      for (int64_t epoch : {0, 3}) {
        std::vector<HostBatch> expected = cpu_epoch(data, options(kGpu, 64, pin, drop_last), epoch);
        loader.start_epoch(epoch);
        Batch b;
        size_t i = 0;
        while (loader.next(b)) {
          REQUIRE(i < expected.size());
          REQUIRE(b.x.device() == kGpu);
          REQUIRE(b.y.device() == kGpu);
          REQUIRE(b.x.shape() == expected[i].shape);
          REQUIRE(bitwise_equal(b.x.to_vector<float>(), expected[i].x));
          REQUIRE(b.y.to_vector<int64_t>() == expected[i].y);
          ++i;
        }
        REQUIRE(i == expected.size());
      }
    }
  }
}

TEST_CASE("DataLoader on cuda stays correct when the host runs ahead of a busy GPU", "[cuda]") {
  // No synchronisation inside the epoch: every batch is copied on the GPU (exact scale by 1 and cast)
  // behind slow kernels, so a slot reused too early (pinned, staging or output) corrupts a batch.
  Dataset data = synthetic(700);
  // The emulated device's streams start only when something waits for them, so there the host always runs ahead
  // and the busy work only has to be queued, not slow (docs/emulation.md).
  Tensor busy = Tensor::ones({ember::cuda::is_emulated() ? 1 << 12 : 1 << 26}, DType::F32, kGpu);
  for (bool pin : {true, false}) {
    INFO("pin_memory " << pin);
    DataLoader loader(data, options(kGpu, 32, pin));
    std::vector<HostBatch> expected = cpu_epoch(data, options(kGpu, 32, pin), 5);
    loader.start_epoch(5);
    std::vector<Tensor> xs, ys;
    std::vector<Batch> kept;  // held batches: the loader must not overwrite them
    Batch b;
    while (loader.next(b)) {
      for (int r = 0; r < 4; ++r) busy = ops::mul(busy, busy);  // keeps the compute stream busy
      xs.push_back(ops::scale(b.x, 1.0));
      ys.push_back(b.y.to(DType::I32));  // a cast kernel: a copy without a host sync
      if (b.index % 3 == 0) kept.push_back(b);
    }
    REQUIRE(xs.size() == expected.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      INFO("batch " << i);
      REQUIRE(bitwise_equal(xs[i].to_vector<float>(), expected[i].x));
      std::vector<int32_t> expected_y(expected[i].y.begin(), expected[i].y.end());
      REQUIRE(ys[i].to_vector<int32_t>() == expected_y);
    }
    for (const Batch& k : kept) {
      INFO("kept batch " << k.index);
      REQUIRE(bitwise_equal(k.x.to_vector<float>(), expected[k.index].x));
      REQUIRE(k.y.to_vector<int64_t>() == expected[k.index].y);
    }
  }
}

TEST_CASE("DataLoader's H2D copies are u8 bytes: pinned async, or pageable sync with --no-pin", "[cuda]") {
  Dataset data = synthetic(1000);
  for (bool pin : {true, false}) {
    for (bool drop_last : {false, true}) {
      INFO("pin_memory " << pin << ", drop_last " << drop_last);
      DataLoader loader(data, options(kGpu, 96, pin, drop_last));
      TransferLedger::global().reset();
      loader.start_epoch(1);
      Batch b;
      int64_t batches = 0;
      while (loader.next(b)) ++batches;
      cuda::synchronize(kGpu);
      const int64_t samples = drop_last ? 960 : 1000;
      REQUIRE(batches == (drop_last ? 10 : 11));
      TransferStats h2d = stats(TransferDirection::HostToDevice);
      CHECK(h2d.count == batches);              // one copy per batch: images and labels together
      CHECK(h2d.bytes == samples * (784 + 1));  // u8 pixels + a u8 label per sample
      CHECK(h2d.pinned == (pin ? batches : 0));
      CHECK(h2d.pageable == (pin ? 0 : batches));
      CHECK(h2d.async == (pin ? batches : 0));
      CHECK(h2d.sync == (pin ? 0 : batches));
      CHECK(stats(TransferDirection::DeviceToHost).count == 0);
      CHECK(stats(TransferDirection::DeviceToDevice).count == 0);
    }
  }
}

TEST_CASE("DataLoader takes no new device memory per step once it has seen every batch size", "[cuda]") {
  // Each batch is a tensor of its own from the caching allocator (like every activation of a step): after the
  // first epoch has shown it the full and the last, partial batch's sizes, later epochs reuse those blocks.
  Dataset data = synthetic(900);
  DataLoader loader(data, options(kGpu, 64, true));
  Batch b;
  int64_t steps = 0;
  loader.start_epoch(0);
  while (loader.next(b)) ++steps;
  cuda::synchronize(kGpu);
  const cuda::MemoryStats before = cuda::memory_stats(0);
  for (int64_t epoch = 1; epoch < 3; ++epoch) {
    loader.start_epoch(epoch);
    while (loader.next(b)) ++steps;
  }
  cuda::synchronize(kGpu);
  const cuda::MemoryStats after = cuda::memory_stats(0);
  REQUIRE(steps == 3 * 15);  // 15 batches per epoch, the last one of 4 rows
  CHECK(after.device_mallocs == before.device_mallocs);
  CHECK(after.reserved_bytes == before.reserved_bytes);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.cache_hits == before.cache_hits + 2 * 2 * 15);  // x and y of every batch, from the cache
}

TEST_CASE("DataLoader on cuda survives abandoned epochs and mid-epoch destruction", "[cuda]") {
  Dataset data = synthetic(500);
  {
    DataLoader idle(data, options(kGpu, 50, true));  // never started: the worker waits, then stops
  }
  {
    DataLoader loader(data, options(kGpu, 50, true));
    Batch b;
    loader.start_epoch(0);
    REQUIRE(loader.next(b));
    REQUIRE(loader.next(b));
    std::vector<HostBatch> expected = cpu_epoch(data, options(kGpu, 50, true), 7);
    loader.start_epoch(7);  // abandons epoch 0 with prefetched batches in the ring
    size_t i = 0;
    while (loader.next(b)) {
      REQUIRE(bitwise_equal(b.x.to_vector<float>(), expected[i].x));
      REQUIRE(b.y.to_vector<int64_t>() == expected[i].y);
      ++i;
    }
    REQUIRE(i == expected.size());
    loader.start_epoch(8);
    REQUIRE(loader.next(b));  // destroyed mid-epoch, copies in flight
  }
  DataLoaderOptions shaped = options(kGpu, 16, true);
  shaped.sample_shape = {1, 28, 28};  // a CNN's
  DataLoader loader(data, shaped);
  Batch b;
  REQUIRE(loader.next(b));
  REQUIRE(b.x.shape() == Shape{16, 1, 28, 28});
  cuda::synchronize(kGpu);
}
