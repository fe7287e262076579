// DataLoader on cpu: batch counts, seeded per-epoch permutations, scaling, buffer reuse, errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "core/device.h"
#include "base/error.h"
#include "core/transfer_ledger.h"
#include "support/threads.h"
#include "data/loader.h"
#include "data/sampler.h"

using namespace ember;
using namespace ember::data;

namespace {

// N samples of 28x28 whose first two bytes spell the sample index (so a batch row says where it
// came from) and whose other bytes cover 0..255.
Dataset indexed_dataset(int64_t n) {
  Dataset data;
  data.images = Tensor::empty({n, 28, 28}, DType::U8);
  data.labels = Tensor::empty({n}, DType::I64);
  uint8_t* px = data.images.data<uint8_t>();
  int64_t* y = data.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* img = px + i * 784;
    for (int64_t p = 0; p < 784; ++p) img[p] = static_cast<uint8_t>((i * 31 + p * 7) % 256);
    img[0] = static_cast<uint8_t>(i % 256);
    img[1] = static_cast<uint8_t>(i / 256);
    y[i] = (i * 7) % 10;
  }
  return data;
}

int64_t sample_of_row(const float* row) {
  return static_cast<int64_t>(row[0] * 255.0f + 0.5f) + 256 * static_cast<int64_t>(row[1] * 255.0f + 0.5f);
}

// The sample indices of one epoch in the order the loader handed them out.
std::vector<int64_t> epoch_samples(DataLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<int64_t> seen;
  Batch batch;
  while (loader.next(batch)) {
    const float* x = batch.x.data<float>();
    for (int64_t r = 0; r < batch.size(); ++r) seen.push_back(sample_of_row(x + r * 784));
  }
  return seen;
}

DataLoaderOptions options(int64_t batch_size, bool shuffle = true, uint64_t seed = 7, bool drop_last = false) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.seed = seed;
  o.drop_last = drop_last;
  return o;
}

}  // namespace

TEST_CASE("DataLoader batch counts with and without drop_last", "[data]") {
  Dataset data = indexed_dataset(103);
  DataLoader keep(data, options(10));
  REQUIRE(keep.batches_per_epoch() == 11);
  REQUIRE(keep.samples_per_epoch() == 103);
  std::vector<int64_t> sizes;
  Batch batch;
  keep.start_epoch(0);
  while (keep.next(batch)) {
    REQUIRE(batch.index == static_cast<int64_t>(sizes.size()));
    sizes.push_back(batch.size());
    REQUIRE(batch.x.shape() == Shape{batch.size(), 784});
    REQUIRE(batch.x.dtype() == DType::F32);
    REQUIRE(batch.y.dtype() == DType::I64);
    REQUIRE(batch.x.device().is_cpu());
  }
  REQUIRE(sizes == std::vector<int64_t>{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 3});
  REQUIRE_FALSE(keep.next(batch));  // stays done until the next start_epoch
  REQUIRE_FALSE(batch.x.defined());

  DataLoader drop(data, options(10, true, 7, true));
  REQUIRE(drop.batches_per_epoch() == 10);
  REQUIRE(drop.samples_per_epoch() == 100);
  REQUIRE(epoch_samples(drop, 0).size() == 100);

  DataLoader exact(indexed_dataset(40), options(10, true, 7, true));
  REQUIRE(exact.batches_per_epoch() == 4);
  DataLoader tiny(indexed_dataset(5), options(10, true, 7, true));
  REQUIRE(tiny.batches_per_epoch() == 0);
  tiny.start_epoch(0);
  REQUIRE_FALSE(tiny.next(batch));
}

TEST_CASE("DataLoader gives every sample exactly once per epoch, in order()'s order", "[data]") {
  Dataset data = indexed_dataset(1000);
  // Batches of 100 rows are gathered in three chunks on the host pool.
  for (int threads : {1, 2}) {
    test::ThreadsScope scope(threads);
    for (int64_t batch_size : {64, 100}) {
      DataLoader loader(data, options(batch_size));
      for (int64_t epoch = 0; epoch < 3; ++epoch) {
        std::vector<int64_t> seen = epoch_samples(loader, epoch);
        REQUIRE(seen == loader.order());
        std::vector<int64_t> sorted = seen;
        std::sort(sorted.begin(), sorted.end());
        std::vector<int64_t> all(1000);
        std::iota(all.begin(), all.end(), int64_t{0});
        REQUIRE(sorted == all);
      }
    }
  }
}

TEST_CASE("DataLoader shuffles reproducibly: same seed same order, new epoch new order", "[data]") {
  Dataset data = indexed_dataset(300);
  DataLoader a(data, options(32, true, 1234)), b(data, options(32, true, 1234)), c(data, options(32, true, 1235));
  std::vector<int64_t> a0 = epoch_samples(a, 0), a1 = epoch_samples(a, 1);
  REQUIRE(a0 == epoch_samples(b, 0));
  REQUIRE(a1 == epoch_samples(b, 1));
  REQUIRE(a0 != a1);
  REQUIRE(a0 != epoch_samples(c, 0));
  // Epochs can be revisited in any order (resume): epoch 0 again is epoch 0.
  REQUIRE(epoch_samples(a, 0) == a0);
  std::vector<int64_t> identity(300);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  REQUIRE(a0 != identity);

  DataLoader plain(data, options(32, false));
  REQUIRE(epoch_samples(plain, 0) == identity);
  REQUIRE(epoch_samples(plain, 5) == identity);
}

TEST_CASE("epoch_permutation is pinned bit for bit and unbiased", "[data]") {
  std::vector<int64_t> order;
  // Golden values (checked against an independent Python Philox4x32-10 + Fisher-Yates): a change
  // of generator or algorithm changes every shuffled run, so it must be deliberate.
  epoch_permutation(10, 42, 0, order);
  REQUIRE(order == std::vector<int64_t>{1, 9, 4, 3, 0, 7, 2, 8, 5, 6});
  epoch_permutation(10, 42, 1, order);
  REQUIRE(order == std::vector<int64_t>{8, 5, 7, 1, 9, 6, 4, 0, 3, 2});
  epoch_permutation(1, 3, 0, order);
  REQUIRE(order == std::vector<int64_t>{0});
  epoch_permutation(0, 3, 0, order);
  REQUIRE(order.empty());
  // All 6 orders of 3 items, each about 1/6 of 6000 epochs (binomial sd ~29: +-150 is > 5 sd).
  std::map<std::vector<int64_t>, int> counts;
  for (int64_t epoch = 0; epoch < 6000; ++epoch) {
    epoch_permutation(3, 99, epoch, order);
    counts[order]++;
  }
  REQUIRE(counts.size() == 6);
  for (const auto& [perm, count] : counts) {
    INFO(perm[0] << perm[1] << perm[2]);
    REQUIRE(count > 850);
    REQUIRE(count < 1150);
  }
  // Position of item 0 after shuffling 5 items over many epochs: uniform too.
  std::vector<int> where(5, 0);
  for (int64_t epoch = 0; epoch < 5000; ++epoch) {
    epoch_permutation(5, 5, epoch, order);
    where[std::find(order.begin(), order.end(), 0) - order.begin()]++;
  }
  for (int count : where) REQUIRE(std::abs(count - 1000) < 150);
}

TEST_CASE("DataLoader scales u8 to f32 in [0, 1] exactly as the cast kernels do", "[data]") {
  Dataset data = indexed_dataset(70);
  const uint8_t* px = data.images.data<uint8_t>();
  const int64_t* labels = data.labels.data<int64_t>();
  const float scale = static_cast<float>(1.0 / 255.0);
  DataLoader loader(data, options(16));
  loader.start_epoch(3);
  Batch batch;
  int64_t row_index = 0;
  while (loader.next(batch)) {
    const float* x = batch.x.data<float>();
    const int64_t* y = batch.y.data<int64_t>();
    for (int64_t r = 0; r < batch.size(); ++r, ++row_index) {
      const int64_t s = loader.order()[row_index];
      REQUIRE(y[r] == labels[s]);
      for (int64_t p = 0; p < 784; ++p) {
        const float expected = static_cast<float>(px[s * 784 + p]) * scale;
        REQUIRE(std::memcmp(&x[r * 784 + p], &expected, sizeof(float)) == 0);
        REQUIRE(x[r * 784 + p] >= 0.0f);
        REQUIRE(x[r * 784 + p] <= 1.0f);
      }
    }
  }
  REQUIRE(row_index == 70);
  // 0 and 255 map to the ends of [0, 1].
  REQUIRE(static_cast<float>(255) * scale == 1.0f);
}

TEST_CASE("DataLoader shapes each batch as the model's samples: flat by default, or the sample shape given", "[data]") {
  DataLoaderOptions o = options(8);
  DataLoader flat(indexed_dataset(12), o);
  Batch batch;
  REQUIRE(flat.next(batch));
  REQUIRE(batch.x.shape() == Shape{8, 784});
  o.sample_shape = {1, 28, 28};  // a CNN's
  DataLoader loader(indexed_dataset(12), o);
  REQUIRE(loader.next(batch));  // epoch 0 starts on its own
  REQUIRE(loader.epoch() == 0);
  REQUIRE(batch.x.shape() == Shape{8, 1, 28, 28});
  REQUIRE(loader.next(batch));
  REQUIRE(batch.x.shape() == Shape{4, 1, 28, 28});
  REQUIRE(batch.y.shape() == Shape{4});
  o.sample_shape = {2, 28, 28};
  REQUIRE_THROWS_WITH(DataLoader(indexed_dataset(12), o),
                      Catch::Contains("samples of 784 values cannot take the model's sample shape [2, 28, 28]"));
}

TEST_CASE("images_to_input gives a batch's values for images outside a loader", "[data]") {
  const Dataset data = indexed_dataset(5);
  DataLoaderOptions o = options(5, false);
  o.sample_shape = {1, 28, 28};
  DataLoader loader(data, o);
  Batch batch;
  REQUIRE(loader.next(batch));
  const Tensor x = images_to_input(data.images, {1, 28, 28}, Device::cpu());
  REQUIRE(x.shape() == Shape{5, 1, 28, 28});
  CHECK(x.to_vector<float>() == batch.x.to_vector<float>());
}

TEST_CASE("DataLoader batches come from the host allocator's cache and a batch someone holds stays intact", "[data]") {
  Dataset data = indexed_dataset(200);
  DataLoader loader(data, options(10));
  std::set<void*> buffers;
  Batch batch;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.start_epoch(epoch);
    while (loader.next(batch)) buffers.insert(batch.x.raw_data());
  }
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer builds keep no freed blocks (core/storage.cpp)
  REQUIRE(buffers.size() <= 3);  // the blocks the previous batches gave back, not an allocation per step
#endif

  loader.start_epoch(4);
  REQUIRE(loader.next(batch));
  Batch kept = batch;
  std::vector<float> kept_x = kept.x.to_vector<float>();
  std::vector<int64_t> kept_y = kept.y.to_vector<int64_t>();
  while (loader.next(batch)) REQUIRE(batch.x.raw_data() != kept.x.raw_data());
  REQUIRE(kept.x.to_vector<float>() == kept_x);
  REQUIRE(kept.y.to_vector<int64_t>() == kept_y);
}

TEST_CASE("DataLoader can abandon an epoch midway", "[data]") {
  Dataset data = indexed_dataset(100);
  DataLoader loader(data, options(10));
  Batch batch;
  loader.start_epoch(0);
  REQUIRE(loader.next(batch));
  REQUIRE(loader.next(batch));
  std::vector<int64_t> seen = epoch_samples(loader, 1);
  std::sort(seen.begin(), seen.end());
  REQUIRE(seen.size() == 100);
  REQUIRE(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
  // Destroyed mid-epoch: nothing to hang on.
  loader.start_epoch(2);
  REQUIRE(loader.next(batch));
}

TEST_CASE("DataLoader on cpu records no copies in the transfer ledger", "[data]") {
  Dataset data = indexed_dataset(50);
  TransferLedger::global().reset();
  DataLoader loader(data, options(8));
  REQUIRE(epoch_samples(loader, 0).size() == 50);
  for (TransferDirection d :
       {TransferDirection::HostToDevice, TransferDirection::DeviceToHost, TransferDirection::DeviceToDevice})
    REQUIRE(TransferLedger::global().stats(d).count == 0);
}

TEST_CASE("DataLoader rejects bad options and datasets", "[data]") {
  Dataset data = indexed_dataset(10);
  REQUIRE_THROWS_AS(DataLoader(data, options(0)), ValueError);
  DataLoaderOptions meta = options(4);
  meta.device = Device::meta();
  REQUIRE_THROWS_AS(DataLoader(data, meta), ValueError);
  if (!cuda::is_available()) {
    DataLoaderOptions gpu = options(4);
    gpu.device = Device::cuda(0);
    REQUIRE_THROWS_AS(DataLoader(data, gpu), DeviceUnavailableError);
  }
  Dataset bad_label = indexed_dataset(10);
  bad_label.labels.data<int64_t>()[3] = 300;
  REQUIRE_THROWS_WITH(DataLoader(bad_label, options(4)), Catch::Contains("label 300 of sample 3"));
  Dataset mismatched = indexed_dataset(10);
  mismatched.labels = Tensor::zeros({9}, DType::I64);
  REQUIRE_THROWS_AS(DataLoader(mismatched, options(4)), ShapeError);
  Dataset wrong_dtype = indexed_dataset(10);
  wrong_dtype.images = Tensor::zeros({10, 28, 28}, DType::F32);
  REQUIRE_THROWS_AS(DataLoader(wrong_dtype, options(4)), DTypeError);
  REQUIRE_THROWS_AS(DataLoader(Dataset{}, options(4)), ValueError);
}

TEST_CASE("DataLoader over a head() of a dataset sees only those samples", "[data]") {
  Dataset data = indexed_dataset(100).head(30);
  DataLoader loader(data, options(7));
  std::vector<int64_t> seen = epoch_samples(loader, 0);
  std::sort(seen.begin(), seen.end());
  REQUIRE(seen.size() == 30);
  REQUIRE(seen.back() == 29);
}

TEST_CASE("DataLoader shards split each global batch into contiguous parts, the same order on every shard", "[data][distributed]") {
  Dataset data = indexed_dataset(103);
  const int64_t shards = 3, batch = 8;  // 13 batches, the last of 7 rows
  DataLoader whole(data, {.batch_size = batch, .shuffle = true, .seed = 4});
  std::vector<DataLoader> parts;
  for (int64_t r = 0; r < shards; ++r)
    parts.emplace_back(data, DataLoaderOptions{.batch_size = batch, .shuffle = true, .seed = 4, .shard_rank = r,
                                               .shard_count = shards});
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    whole.start_epoch(epoch);
    for (auto& p : parts) p.start_epoch(epoch);
    Batch all;
    while (whole.next(all)) {
      std::vector<int64_t> joined;
      for (int64_t r = 0; r < shards; ++r) {
        Batch b;
        REQUIRE(parts[r].next(b));
        CHECK(b.index == all.index);
        CHECK(b.global_size == all.size());
        CHECK(b.size() == all.size() * (r + 1) / shards - all.size() * r / shards);
        for (int64_t i = 0; i < b.size(); ++i) joined.push_back(sample_of_row(b.x.data<float>() + i * 784));
      }
      std::vector<int64_t> expected;
      for (int64_t i = 0; i < all.size(); ++i) expected.push_back(sample_of_row(all.x.data<float>() + i * 784));
      CHECK(joined == expected);
    }
    for (auto& p : parts) {
      Batch b;
      CHECK_FALSE(p.next(b));
    }
  }
  CHECK_THROWS_WITH(DataLoader(data, {.shard_rank = 3, .shard_count = 3}), Catch::Contains("shard 3 of 3 does not exist"));
}

TEST_CASE("Dataset::shard splits a set into near-equal contiguous views", "[data][distributed]") {
  Dataset data = indexed_dataset(10);
  int64_t next = 0;
  for (int64_t r = 0; r < 3; ++r) {
    Dataset part = data.shard(r, 3);
    CHECK(part.size() == (r == 2 ? 4 : 3));
    for (int64_t i = 0; i < part.size(); ++i) CHECK(part.labels.data<int64_t>()[i] == (next++ * 7) % 10);
  }
  CHECK(next == 10);
  CHECK(data.shard(0, 1).size() == 10);
  CHECK_THROWS_WITH(data.shard(0, 11), Catch::Contains("cannot be split into 11 non-empty parts"));
  CHECK_THROWS_AS(data.shard(2, 2), ValueError);
}
