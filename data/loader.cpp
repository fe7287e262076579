// DataLoader: the epoch's order and batches (data/sampler.h), the host gather that scales u8 pixels straight into
// a batch's f32 rows, and on CUDA the prefetcher's copies with the scaling on the device (data/prefetch.h).
#include "data/loader.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/ops.h"
#include "core/host.h"
#include "data/prefetch.h"
#include "data/sampler.h"

namespace ember::data {

namespace {

// The same float scale the u8 -> f32 cast kernels use, so cpu and cuda batches are bitwise identical.
constexpr float kPixelScaleF = static_cast<float>(kPixelScale);

// How far ahead the host gather asks for rows (see gather_to_host), and the request for one row's cache lines.
constexpr int64_t kPrefetchRows = 4;
void prefetch_row(const uint8_t* row, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off);
}

// (rows, *sample_shape), or (rows, sample_numel) when no sample shape is given.
Shape batch_shape(int64_t rows, const Shape& sample_shape, int64_t sample_numel) {
  Shape shape{rows};
  if (sample_shape.empty()) shape.push_back(sample_numel);
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  return shape;
}

void check_sample_shape(const Shape& sample_shape, int64_t sample_numel) {
  EMBER_CHECK(sample_shape.empty() || shape_numel(sample_shape) == sample_numel, ShapeError,
              "DataLoader: samples of ", sample_numel, " values cannot take the model's sample shape ",
              shape_str(sample_shape));
}

}  // namespace

Tensor images_to_input(const Tensor& images, const Shape& sample_shape, Device device) {
  EMBER_CHECK(images.defined() && images.dim() >= 1 && images.dtype() == DType::U8, DTypeError,
              "images_to_input() expects uint8 images (N, H, W)");
  const int64_t n = images.size(0), numel = n > 0 ? images.numel() / n : 0;
  check_sample_shape(sample_shape, numel);
  return ops::cast(images.to(device).reshape(batch_shape(n, sample_shape, numel)), DType::F32, kPixelScale);
}

struct DataLoader::Impl {
  Dataset data;
  DataLoaderOptions opt;
  BatchPlan plan;
  int64_t sample_bytes = 0;  // values (u8 pixels) of one sample
  std::vector<int64_t> order;
  int64_t epoch = 0;
  bool started = false;
  int64_t next_batch = 0;  // the batch next() hands out next
  std::unique_ptr<DevicePrefetcher> prefetcher;  // on CUDA only

  Impl(const Dataset& dataset, DataLoaderOptions options);
  void check_options() const;
  void start_epoch(int64_t e);
  bool next(Batch& batch);
  void gather_to_host(int64_t b, float* x, int64_t* y) const;
  int64_t gather_packed(int64_t b, uint8_t* dst) const;
  void scale_on_device(int64_t b, Tensor& x, Tensor& y);
};

DataLoader::Impl::Impl(const Dataset& dataset, DataLoaderOptions options) : data(dataset), opt(std::move(options)) {
  data.check();
  check_options();
  sample_bytes = data.sample_numel();
  check_sample_shape(opt.sample_shape, sample_bytes);
  plan = {data.size(), opt.batch_size, opt.drop_last, opt.shard_rank, opt.shard_count};
  order.resize(static_cast<size_t>(data.size()));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!opt.device.is_cuda()) return;
  cuda::require(opt.device);
  int64_t slot_bytes = 0;  // B images then B labels, all u8
  EMBER_CHECK(!__builtin_mul_overflow(opt.batch_size, sample_bytes + 1, &slot_bytes), ValueError,
              "DataLoader: batch_size ", opt.batch_size, " is too large");
  prefetcher = std::make_unique<DevicePrefetcher>(opt.device, slot_bytes, opt.pin_memory,
                                                  [this](int64_t b, uint8_t* dst) { return gather_packed(b, dst); });
}

void DataLoader::Impl::check_options() const {
  EMBER_CHECK(opt.batch_size >= 1, ValueError, "DataLoader: batch_size must be >= 1, got ", opt.batch_size);
  EMBER_CHECK(opt.shard_count >= 1 && opt.shard_rank >= 0 && opt.shard_rank < opt.shard_count, ValueError,
              "DataLoader: shard ", opt.shard_rank, " of ", opt.shard_count, " does not exist (need 0 <= rank < count)");
  EMBER_CHECK(!opt.device.is_meta(), ValueError,
              "DataLoader: cannot load batches onto the meta device (it has no memory); use cpu or cuda");
  // Labels cross the bus as bytes next to their images (one copy per batch).
  const int64_t* labels = data.labels.data<int64_t>();
  for (int64_t i = 0; i < data.size(); ++i)
    EMBER_CHECK(labels[i] >= 0 && labels[i] <= 255, ValueError, "DataLoader: label ", labels[i], " of sample ", i,
                " is outside 0..255 (class indices are expected)");
}

int64_t DataLoader::Impl::gather_packed(int64_t b, uint8_t* dst) const {
  const uint8_t* images = data.images.data<uint8_t>();
  const int64_t* labels = data.labels.data<int64_t>();
  const int64_t rows = plan.rows(b), first = plan.first(b);
  uint8_t* label_dst = dst + rows * sample_bytes;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t s = order[first + i];
    std::memcpy(dst + i * sample_bytes, images + s * sample_bytes, static_cast<size_t>(sample_bytes));
    label_dst[i] = static_cast<uint8_t>(labels[s]);
  }
  return rows * (sample_bytes + 1);
}

void DataLoader::Impl::gather_to_host(int64_t b, float* x, int64_t* y) const {
  const uint8_t* images = data.images.data<uint8_t>();
  const int64_t* labels = data.labels.data<int64_t>();
  const int64_t rows = plan.rows(b), first = plan.first(b), d = sample_bytes;
  // Rows are independent: the host pool gathers them in chunks (the same bytes at any thread count).
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, d));
  parallel_chunks(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // Rows sit at random places in a large array: ask for a later row's lines while this one converts,
      // or every row waits on memory.
      if (i + kPrefetchRows < end) prefetch_row(images + order[first + i + kPrefetchRows] * d, d);
      const int64_t s = order[first + i];
      const uint8_t* src = images + s * d;
      float* row = x + i * d;
      for (int64_t p = 0; p < d; ++p) row[p] = static_cast<float>(src[p]) * kPixelScaleF;
      y[i] = labels[s];
    }
  });
}

// u8 crossed the bus (4x fewer bytes than f32); the compute stream scales it into the batch's tensors.
void DataLoader::Impl::scale_on_device(int64_t b, Tensor& x, Tensor& y) {
  const int64_t rows = plan.rows(b);
  prefetcher->consume(b, [&](const Tensor& bytes) {
    ops::cast_(x, bytes.slice(0, 0, rows * sample_bytes), kPixelScale);
    ops::cast_(y, bytes.slice(0, rows * sample_bytes, rows * (sample_bytes + 1)), 1.0);
  });
}

void DataLoader::Impl::start_epoch(int64_t e) {
  if (prefetcher) prefetcher->restart(0);  // the worker stops reading the order before it changes
  if (opt.shuffle) epoch_permutation(data.size(), opt.seed, e, order);  // reuses order's memory
  epoch = e;
  started = true;
  next_batch = 0;
  if (prefetcher) prefetcher->restart(plan.batches());
}

bool DataLoader::Impl::next(Batch& batch) {
  if (!started) start_epoch(0);
  batch.x = Tensor();  // let go of the caller's previous batch: its memory goes back to the allocator's cache
  batch.y = Tensor();
  if (next_batch >= plan.batches()) return false;
  const int64_t b = next_batch;
  const int64_t rows = plan.rows(b);
  Tensor x = Tensor::empty({rows, sample_bytes}, DType::F32, opt.device);
  Tensor y = Tensor::empty({rows}, DType::I64, opt.device);
  if (prefetcher) scale_on_device(b, x, y);
  else gather_to_host(b, x.data<float>(), y.data<int64_t>());
  batch.x = x.view(batch_shape(rows, opt.sample_shape, sample_bytes));
  batch.y = std::move(y);
  batch.index = b;
  batch.global_size = plan.global_rows(b);
  ++next_batch;
  return true;
}

DataLoader::DataLoader(const Dataset& dataset, DataLoaderOptions options)
    : impl_(std::make_unique<Impl>(dataset, std::move(options))) {}
DataLoader::~DataLoader() = default;
DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&&) noexcept = default;

void DataLoader::start_epoch(int64_t epoch) { impl_->start_epoch(epoch); }
bool DataLoader::next(Batch& batch) { return impl_->next(batch); }
int64_t DataLoader::batches_per_epoch() const { return impl_->plan.batches(); }
int64_t DataLoader::samples_per_epoch() const { return impl_->plan.epoch_samples(); }
int64_t DataLoader::epoch() const { return impl_->epoch; }
const std::vector<int64_t>& DataLoader::order() const { return impl_->order; }
const DataLoaderOptions& DataLoader::options() const { return impl_->opt; }

}  // namespace ember::data
