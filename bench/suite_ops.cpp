// ops: the op registry's timed rows (core/ops/registry.h, the rows with a bench title), run through core on the
// host, on the device with the data resident, and on the device with the copies its data needs; GB/s against the
// measured memcpy / D2D copy bandwidth. Each device result is checked against the host's before it is timed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/suites.h"
#include "core/cuda_runtime.h"
#include "core/ops/registry.h"

namespace ember::bench {

namespace {

std::vector<int64_t> op_sizes(bool quick, bool cuda, bool emulated) {
  // Without a GPU there is nothing to compare at the sizes only a GPU's memory bandwidth shows.
  std::vector<int64_t> sizes;
  const int64_t largest = emulated ? int64_t(1) << 16
                          : quick  ? (cuda ? int64_t(1) << 24 : int64_t(1) << 22)
                                   : int64_t(1) << 26;
  const int64_t step = quick ? 16 : 4;
  for (int64_t n = 1 << 10; n <= largest; n *= step) sizes.push_back(n);
  if (sizes.back() != largest) sizes.push_back(largest);
  return sizes;
}

Row op_row(const ops::OpRow& spec, const ops::OpCase& op, double bytes, const std::string& device, const char* timer) {
  Row r;
  r.suite = "ops";
  r.table = spec.bench;
  r.name = spec.name;
  r.label = op.label;
  r.params = {{"elements", op.elements}};
  r.size = static_cast<double>(op.elements);
  r.column = device;
  r.device = device;
  r.timer = timer;
  r.bytes = bytes;
  return r;
}

// The copies the ops are measured against: a host memcpy and a device D2D copy that move the same
// bytes as the op (read + written), so both sit in the same level of the memory hierarchy; at sizes
// far above the caches this is the DRAM bandwidth the goal refers to.
class References {
 public:
  explicit References(BenchContext& ctx) : ctx_(ctx) {}

  std::optional<double> host_gbps(double op_bytes) { return measure(op_bytes, false); }
  std::optional<double> device_gbps(double op_bytes) { return measure(op_bytes, true); }

  // Rows in ascending size, host then device, after the ops' tables.
  void add_rows() {
    std::stable_sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) { return a.size < b.size; });
    for (Row& r : rows_) ctx_.add(std::move(r));
    rows_.clear();
  }

 private:
  std::optional<double> measure(double op_bytes, bool device) {
    const int64_t copy_bytes = std::max<int64_t>(static_cast<int64_t>(op_bytes / 2), 1);
    auto& cache = device ? device_ : host_;
    if (auto it = cache.find(copy_bytes); it != cache.end()) return it->second;
    Row r;
    r.suite = "ops";
    r.table = "copy references: a copy moving the same bytes as the op (bytes read + written)";
    r.name = device ? "d2d_reference" : "memcpy_reference";
    r.label = format_bytes(double(copy_bytes)) + " copied";
    r.params = {{"bytes", copy_bytes}};
    r.size = double(copy_bytes);
    r.column = device ? "cuda (D2D)" : "cpu (memcpy)";
    r.device = device ? "cuda" : "cpu";
    r.timer = device ? "cuda_events" : "steady_clock";
    r.bytes = 2.0 * double(copy_bytes);
    if (device && !ctx_.cuda()) {
      r = unmeasured(r, kNoCudaDevice);
    } else if (device) {
      Tensor src = Tensor::zeros({copy_bytes}, DType::U8, Device::cuda(0));
      Tensor dst = Tensor::empty({copy_bytes}, DType::U8, Device::cuda(0));
      r = measured(r, sample_device([&] {
        cuda::runtime::memcpy(dst.raw_data(), src.raw_data(), size_t(copy_bytes),
                              cuda::runtime::CopyKind::DeviceToDevice, ctx_.stream->handle(), true);
      }, *ctx_.stream, ctx_.timing, ctx_.flusher.get()));
    } else {
      Tensor src = Tensor::empty({copy_bytes}, DType::U8), dst = Tensor::empty({copy_bytes}, DType::U8);
      std::memset(src.raw_data(), 1, size_t(copy_bytes));
      std::memset(dst.raw_data(), 0, size_t(copy_bytes));
      r = measured(r, sample_host([&] { std::memcpy(dst.raw_data(), src.raw_data(), size_t(copy_bytes)); },
                                  ctx_.timing));
    }
    std::optional<double> gbps = r.gb_per_s();
    cache[copy_bytes] = gbps;
    rows_.push_back(std::move(r));
    return gbps;
  }

  BenchContext& ctx_;
  std::map<int64_t, std::optional<double>> host_, device_;
  std::vector<Row> rows_;
};

void add_percent(Row& row, std::optional<double> reference, const char* key, const char* what) {
  auto gbps = row.gb_per_s();
  if (!gbps || !reference || *reference <= 0) return;
  double pct = 100.0 * *gbps / *reference;
  char text[64];
  std::snprintf(text, sizeof text, "%s %.0f%% of %s", row.device.c_str(), pct, what);
  row.extras.push_back({key, pct, text});
}

// Empty when every device output is within the row's tolerance of the host's, else what differs.
std::string verify(const ops::OpRow& spec, const ops::OpCase& op, const std::vector<Tensor>& want) {
  const std::vector<Tensor> got = ops::run_on(op, Device::cuda(0));
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string what =
        std::string(spec.name) + " on CUDA differs from the CPU twin (output " + std::to_string(i) + ")";
    if (i >= got.size() || got[i].shape() != want[i].shape() || got[i].dtype() != want[i].dtype())
      return what + ": not the same shape and dtype";
    const std::vector<double> g = got[i].to(Device::cpu()).to(DType::F64).to_vector<double>();
    const std::vector<double> w = want[i].to(DType::F64).to_vector<double>();
    double diff = 0, scale = 1;
    for (size_t k = 0; k < w.size(); ++k) {
      const double d = std::fabs(g[k] - w[k]);
      if (!(d <= diff)) diff = d;  // a NaN on either side wins and fails the check
      scale = std::max(scale, std::fabs(w[k]));
    }
    if (!(diff <= op.tolerance * scale)) return mismatch(what, diff, op.tolerance * scale);
  }
  return "";
}

// The device as seen from host data: pinned inputs over, the op, its outputs back into pinned memory, waited for.
Row time_with_copies(BenchContext& ctx, const ops::OpCase& op, std::vector<Tensor>& dev,
                     const std::vector<Tensor>& want, Row row) {
  const Device cuda0 = Device::cuda(0);
  std::vector<Tensor> pinned_in, pinned_out;
  for (const Tensor& t : op.inputs) pinned_in.push_back(t.pin_memory());
  for (const Tensor& t : want) pinned_out.push_back(Tensor::empty(t.shape(), t.dtype(), Device::cpu(), true));
  return measured(row, sample_host([&] {
    for (size_t i = 0; i < dev.size(); ++i) dev[i].copy_from(pinned_in[i], true);
    const std::vector<Tensor> out = op.run(cuda0, dev);
    for (size_t i = 0; i < out.size(); ++i) pinned_out[i].copy_from(out[i], true);
    ctx.stream->synchronize();
  }, ctx.timing));
}

void measure_op(BenchContext& ctx, const ops::OpRow& spec, int64_t n, References& refs) {
  const ops::OpCase op = spec.make(n, spec.dtypes.front());
  ctx.progress(std::string("ops: ") + spec.name + " " + op.label);
  const std::vector<Tensor> want = ops::run_on(op, Device::cpu());
  const double bytes = ops::counted_bytes(op, want);
  Row cpu_row = op_row(spec, op, bytes, "cpu", "steady_clock");
  Row cuda_row = op_row(spec, op, bytes, "cuda", "cuda_events");
  Row copies_row = op_row(spec, op, bytes, "cuda+copies", "steady_clock");
  double bus_bytes = 0;
  for (const Tensor& t : op.inputs) bus_bytes += double(t.nbytes());
  for (const Tensor& t : want) bus_bytes += double(t.nbytes());
  copies_row.params.push_back({"bus_bytes", static_cast<int64_t>(bus_bytes)});
  const std::string problem = ctx.cuda() ? verify(spec, op, want) : "";

  std::vector<Tensor> host = ops::inputs_on(op, Device::cpu());  // in-place ops keep updating these
  cpu_row = measured(cpu_row, sample_host([&] { op.run(Device::cpu(), host); }, ctx.timing));
  add_percent(cpu_row, refs.host_gbps(bytes), "pct_of_host_memcpy", "memcpy");
  ctx.add(cpu_row);
  if (!ctx.cuda()) {
    refs.device_gbps(bytes);  // an unmeasured reference row, like the op's
    ctx.add(unmeasured(cuda_row, kNoCudaDevice));
    ctx.add(unmeasured(copies_row, kNoCudaDevice));
    return;
  }
  if (!problem.empty()) {
    ctx.fail(cuda_row, problem);
    ctx.fail(copies_row, problem);
    return;
  }
  std::vector<Tensor> dev = ops::inputs_on(op, Device::cuda(0));
  cuda_row = measured(cuda_row, sample_device([&] { op.run(Device::cuda(0), dev); }, *ctx.stream, ctx.timing,
                                              ctx.flusher.get()));
  add_percent(cuda_row, refs.device_gbps(bytes), "pct_of_d2d", "D2D");
  ctx.add(cuda_row);
  ctx.add(time_with_copies(ctx, op, dev, want, copies_row));
}

}  // namespace

void run_ops(BenchContext& ctx) {
  References refs(ctx);
  const std::vector<int64_t> sizes = op_sizes(ctx.quick, ctx.cuda(), ctx.emulated());
  for (const ops::OpRow& spec : ops::op_registry())
    if (spec.bench != nullptr)
      for (int64_t n : sizes) measure_op(ctx, spec, n, refs);
  refs.add_rows();
}

}  // namespace ember::bench
