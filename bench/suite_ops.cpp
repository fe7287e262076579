// ops: the step's memory-bound kernels (elementwise, bias+ReLU, reductions, softmax-cross-entropy,
// optimizer updates) on the host, on the device, and on the device with the copies its data needs;
// GB/s against the measured memcpy / D2D copy bandwidth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/suites.h"
#include "core/cuda_runtime.h"
#include "kernels/elementwise.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"
#include "kernels/softmax_xent.h"

namespace ember::bench {

namespace {

constexpr double kF = sizeof(float);
constexpr int64_t kCols = 256;    // bias+ReLU and sum_rows: the MLP's widest hidden layer
constexpr int64_t kClasses = 10;  // softmax-cross-entropy: the MLP's logits

using Buffers = std::vector<Tensor>;

// One op at one size: its buffers on the host and how to run it on either side.
struct OpInstance {
  std::string label;
  std::vector<std::pair<std::string, int64_t>> params;
  int64_t n = 0;     // elements of the main operand: the size the crossover counts
  double bytes = 0;  // read + written by the kernels of one repetition
  Buffers host;      // every operand, filled
  std::vector<int> inputs, outputs;  // what crosses the bus before / after the device runs it
  std::vector<int> checked;          // float outputs compared with the host's
  double tolerance = 0;              // max |cuda - cpu| allowed, times max(1, max |cpu|)
  std::function<void(Buffers&)> cpu;
  std::function<void(Buffers&, kernels::Stream)> cuda;  // unset without the CUDA backend
};

struct OpSpec {
  const char* name;
  const char* title;
  OpInstance (*make)(int64_t n);
};

Tensor uniform(const Shape& shape, uint64_t seed, double low, double high) {
  return Tensor::rand(shape, seed, DType::F32, Device::cpu(), low, high);
}

// Multiples of 1/64 in [-1, 1]: every partial sum of them is exact in float at the sizes used here,
// so host and device sums agree exactly in any order and one lost element shows.
Tensor exactly_summable(const Shape& shape, uint64_t seed) {
  Tensor t = uniform(shape, seed, -1, 1);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::round(p[i] * 64.f) / 64.f;
  return t;
}

float* f(Buffers& b, int i) { return b[size_t(i)].data<float>(); }

OpInstance make_add(int64_t n) {
  OpInstance op;
  op.n = n, op.label = "n=" + format_count(double(n)), op.params = {{"n", n}};
  op.bytes = 3 * kF * double(n);
  op.host = {uniform({n}, 1, -1, 1), uniform({n}, 2, -1, 1), Tensor::empty({n})};
  op.inputs = {0, 1}, op.outputs = {2}, op.checked = {2};
  op.tolerance = 1e-5;
  op.cpu = [n](Buffers& b) { kernels::cpu::add<float>(f(b, 0), f(b, 1), f(b, 2), n); };
#if EMBER_HAS_CUDA
  op.cuda = [n](Buffers& b, kernels::Stream s) { kernels::cuda::add<float>(f(b, 0), f(b, 1), f(b, 2), n, s); };
#endif
  return op;
}

OpInstance make_bias_relu(int64_t n) {
  OpInstance op;
  const int64_t rows = std::max<int64_t>(n / kCols, 1), cols = kCols;
  op.n = rows * cols, op.label = std::to_string(rows) + "x" + std::to_string(cols);
  op.params = {{"rows", rows}, {"cols", cols}};
  op.bytes = kF * (4.0 * double(op.n) + double(cols));  // add_bias: read x, bias, write; relu in place: read, write
  op.host = {uniform({rows, cols}, 3, -1, 1), uniform({cols}, 4, -1, 1), Tensor::empty({rows, cols})};
  op.inputs = {0, 1}, op.outputs = {2}, op.checked = {2};
  op.tolerance = 1e-5;
  op.cpu = [rows, cols](Buffers& b) {
    kernels::cpu::add_bias<float>(f(b, 0), f(b, 1), f(b, 2), rows, cols);
    kernels::cpu::relu<float>(f(b, 2), f(b, 2), rows * cols);
  };
#if EMBER_HAS_CUDA
  op.cuda = [rows, cols](Buffers& b, kernels::Stream s) {
    kernels::cuda::add_bias<float>(f(b, 0), f(b, 1), f(b, 2), rows, cols, s);
    kernels::cuda::relu<float>(f(b, 2), f(b, 2), rows * cols, s);
  };
#endif
  return op;
}

OpInstance make_sum(int64_t n) {
  OpInstance op;
  op.n = n, op.label = "n=" + format_count(double(n)), op.params = {{"n", n}};
  op.bytes = kF * double(n);
  int64_t workspace = 1;
#if EMBER_HAS_CUDA
  workspace = std::max<int64_t>(static_cast<int64_t>(kernels::cuda::sum_workspace_elems(n)), 1);
#endif
  op.host = {exactly_summable({n}, 5), Tensor::zeros({1}), Tensor::zeros({workspace})};
  op.inputs = {0}, op.outputs = {1}, op.checked = {1};
  op.tolerance = 1e-6;
  op.cpu = [n](Buffers& b) { kernels::cpu::sum<float>(f(b, 0), n, 1.f, f(b, 1)); };
#if EMBER_HAS_CUDA
  op.cuda = [n](Buffers& b, kernels::Stream s) { kernels::cuda::sum<float>(f(b, 0), n, 1.f, f(b, 1), f(b, 2), s); };
#endif
  return op;
}

OpInstance make_sum_rows(int64_t n) {
  OpInstance op;
  const int64_t rows = std::max<int64_t>(n / kCols, 1), cols = kCols;
  op.n = rows * cols, op.label = std::to_string(rows) + "x" + std::to_string(cols);
  op.params = {{"rows", rows}, {"cols", cols}};
  op.bytes = kF * (double(op.n) + double(cols));
  op.host = {exactly_summable({rows, cols}, 6), Tensor::zeros({cols})};
  op.inputs = {0}, op.outputs = {1}, op.checked = {1};
  op.tolerance = 1e-6;
  op.cpu = [rows, cols](Buffers& b) { kernels::cpu::sum_rows<float>(f(b, 0), rows, cols, 0.f, f(b, 1)); };
#if EMBER_HAS_CUDA
  op.cuda = [rows, cols](Buffers& b, kernels::Stream s) {
    kernels::cuda::sum_rows<float>(f(b, 0), rows, cols, 0.f, f(b, 1), s);
  };
#endif
  return op;
}

OpInstance make_softmax_xent(int64_t n) {
  OpInstance op;
  const int64_t rows = std::max<int64_t>(n / kClasses, 1), cols = kClasses;
  op.n = rows * cols, op.label = std::to_string(rows) + "x" + std::to_string(cols);
  op.params = {{"rows", rows}, {"cols", cols}};
  // forward: read logits + labels, write probs + row losses; backward: read probs + labels, write grads
  op.bytes = kF * 4.0 * double(op.n) + double(rows) * (8 + kF + 8);
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) labels[size_t(r)] = (r * 7 + 3) % cols;
  op.host = {uniform({rows, cols}, 7, -4, 4), Tensor::from_vector(labels, {rows}), Tensor::empty({rows, cols}),
             Tensor::empty({rows}), Tensor::empty({rows, cols}), Tensor::full({1}, -1, DType::I64)};
  op.inputs = {0, 1}, op.outputs = {3, 4}, op.checked = {2, 3, 4};
  op.tolerance = 1e-4;
  const float grad_scale = 1.f / float(rows);
  op.cpu = [rows, cols, grad_scale](Buffers& b) {
    const int64_t* y = b[1].data<int64_t>();
    kernels::cpu::softmax_xent_forward<float, int64_t>(f(b, 0), y, f(b, 2), f(b, 3), rows, cols);
    kernels::cpu::softmax_xent_backward<float, int64_t>(f(b, 2), y, grad_scale, f(b, 4), rows, cols);
  };
#if EMBER_HAS_CUDA
  op.cuda = [rows, cols, grad_scale](Buffers& b, kernels::Stream s) {
    const int64_t* y = b[1].data<int64_t>();
    kernels::cuda::softmax_xent_forward<float, int64_t>(f(b, 0), y, f(b, 2), f(b, 3), rows, cols,
                                                        b[5].data<int64_t>(), s);
    kernels::cuda::softmax_xent_backward<float, int64_t>(f(b, 2), y, grad_scale, f(b, 4), rows, cols, s);
  };
#endif
  return op;
}

OpInstance make_sgd(int64_t n) {
  OpInstance op;
  op.n = n, op.label = "n=" + format_count(double(n)), op.params = {{"n", n}};
  op.bytes = 5 * kF * double(n);  // read param, grad, momentum; write param, momentum
  op.host = {uniform({n}, 8, -1, 1), uniform({n}, 9, -0.1, 0.1), uniform({n}, 10, -0.1, 0.1)};
  op.inputs = {0, 1, 2}, op.outputs = {0, 2}, op.checked = {0, 2};
  op.tolerance = 1e-5;
  const kernels::SgdParams<float> p{0.01f, 0.9f, 0.f, 1e-4f, true, false};
  op.cpu = [n, p](Buffers& b) { kernels::cpu::sgd_step<float>(f(b, 0), f(b, 1), f(b, 2), n, p); };
#if EMBER_HAS_CUDA
  op.cuda = [n, p](Buffers& b, kernels::Stream s) { kernels::cuda::sgd_step<float>(f(b, 0), f(b, 1), f(b, 2), n, p, s); };
#endif
  return op;
}

OpInstance make_adamw(int64_t n) {
  OpInstance op;
  op.n = n, op.label = "n=" + format_count(double(n)), op.params = {{"n", n}};
  op.bytes = 7 * kF * double(n);  // read param, grad, m, v; write param, m, v
  op.host = {uniform({n}, 11, -1, 1), uniform({n}, 12, -0.1, 0.1), uniform({n}, 13, -0.01, 0.01),
             uniform({n}, 14, 0, 1e-4)};
  op.inputs = {0, 1, 2, 3}, op.outputs = {0, 2, 3}, op.checked = {0, 2, 3};
  op.tolerance = 1e-4;
  const kernels::AdamWParams<float> p{1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, 10};
  op.cpu = [n, p](Buffers& b) { kernels::cpu::adamw_step<float>(f(b, 0), f(b, 1), f(b, 2), f(b, 3), n, p); };
#if EMBER_HAS_CUDA
  op.cuda = [n, p](Buffers& b, kernels::Stream s) {
    kernels::cuda::adamw_step<float>(f(b, 0), f(b, 1), f(b, 2), f(b, 3), n, p, s);
  };
#endif
  return op;
}

const OpSpec kOps[] = {
    {"add", "add: out = a + b (12 bytes per element)", make_add},
    {"bias_relu", "bias+ReLU: relu(x + bias), two kernels (16 bytes per element)", make_bias_relu},
    {"sum", "sum: all elements to one (4 bytes per element)", make_sum},
    {"sum_rows", "sum_rows: (rows, 256) -> (256), the bias gradient (4 bytes per element)", make_sum_rows},
    {"softmax_xent", "softmax-cross-entropy forward + backward, 10 classes (16 bytes per logit + labels)",
     make_softmax_xent},
    {"sgd_step", "SGD step, Nesterov momentum (20 bytes per parameter)", make_sgd},
    {"adamw_step", "AdamW step (28 bytes per parameter)", make_adamw},
};

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

Row op_row(const OpSpec& spec, const OpInstance& op, const std::string& device, const char* timer) {
  Row r;
  r.suite = "ops";
  r.table = spec.title;
  r.name = spec.name;
  r.label = op.label;
  r.params = op.params;
  r.size = static_cast<double>(op.n);
  r.column = device;
  r.device = device;
  r.timer = timer;
  r.bytes = op.bytes;
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

void measure_op(BenchContext& ctx, const OpSpec& spec, int64_t n, References& refs) {
  OpInstance op = spec.make(n);
  ctx.progress(std::string("ops: ") + spec.name + " " + op.label);
  Row cpu_row = op_row(spec, op, "cpu", "steady_clock");
  Row cuda_row = op_row(spec, op, "cuda", "cuda_events");
  Row copies_row = op_row(spec, op, "cuda+copies", "steady_clock");
  double bus_bytes = 0;
  for (int i : op.inputs) bus_bytes += double(op.host[size_t(i)].nbytes());
  for (int i : op.outputs) bus_bytes += double(op.host[size_t(i)].nbytes());
  copies_row.params.push_back({"bus_bytes", static_cast<int64_t>(bus_bytes)});

  std::string problem;  // a CUDA result that differs from the CPU twin's
  Buffers dev;
  if (ctx.cuda()) {
    // The same starting buffers on both sides, before the host timing changes the in-place ones.
    for (const Tensor& t : op.host) dev.push_back(t.to(Device::cuda(0)));
    Buffers ref;
    for (const Tensor& t : op.host) ref.push_back(t.clone());
    op.cpu(ref);
    op.cuda(dev, ctx.stream->handle());
    ctx.stream->synchronize();
    for (int i : op.checked) {
      std::vector<float> got = dev[size_t(i)].to_vector<float>();
      const Tensor& want = ref[size_t(i)];
      double tolerance = op.tolerance * std::max(1.0, max_abs(want.data<float>(), want.numel()));
      double diff = max_abs_diff(got.data(), want.data<float>(), want.numel());
      if (!(diff <= tolerance))
        problem = mismatch(std::string(spec.name) + " on CUDA differs from the CPU twin (output " + std::to_string(i) + ")",
                           diff, tolerance);
    }
    if (std::string(spec.name) == "softmax_xent" && dev[5].item<int64_t>() != -1)
      problem = "softmax_xent on CUDA flagged row " + std::to_string(dev[5].item<int64_t>()) + " as a bad label";
  }

  cpu_row = measured(cpu_row, sample_host([&] { op.cpu(op.host); }, ctx.timing));
  add_percent(cpu_row, refs.host_gbps(op.bytes), "pct_of_host_memcpy", "memcpy");
  ctx.add(cpu_row);
  if (!ctx.cuda()) {
    refs.device_gbps(op.bytes);  // an unmeasured reference row, like the op's
    ctx.add(unmeasured(cuda_row, kNoCudaDevice));
    ctx.add(unmeasured(copies_row, kNoCudaDevice));
    return;
  }
  if (!problem.empty()) {
    ctx.fail(cuda_row, problem);
    ctx.fail(copies_row, problem);
    return;
  }
  cuda_row = measured(cuda_row, sample_device([&] { op.cuda(dev, ctx.stream->handle()); }, *ctx.stream, ctx.timing,
                                              ctx.flusher.get()));
  add_percent(cuda_row, refs.device_gbps(op.bytes), "pct_of_d2d", "D2D");
  ctx.add(cuda_row);

  // The device as seen from host data: pinned inputs over, the kernels, outputs back, waited for.
  Buffers pinned;
  for (const Tensor& t : op.host) pinned.push_back(Tensor::empty(t.shape(), t.dtype(), Device::cpu(), true).copy_from(t));
  auto with_copies = [&] {
    using cuda::runtime::CopyKind;
    for (int i : op.inputs)
      cuda::runtime::memcpy(dev[size_t(i)].raw_data(), pinned[size_t(i)].raw_data(), pinned[size_t(i)].nbytes(),
                            CopyKind::HostToDevice, ctx.stream->handle(), true);
    op.cuda(dev, ctx.stream->handle());
    for (int i : op.outputs)
      cuda::runtime::memcpy(pinned[size_t(i)].raw_data(), dev[size_t(i)].raw_data(), pinned[size_t(i)].nbytes(),
                            CopyKind::DeviceToHost, ctx.stream->handle(), true);
    ctx.stream->synchronize();
  };
  copies_row = measured(copies_row, sample_host(with_copies, ctx.timing));
  ctx.add(copies_row);
}

}  // namespace

void run_ops(BenchContext& ctx) {
  References refs(ctx);
  const std::vector<int64_t> sizes = op_sizes(ctx.quick, ctx.cuda(), ctx.emulated());
  for (const OpSpec& spec : kOps)
    for (int64_t n : sizes) measure_op(ctx, spec, n, refs);
  refs.add_rows();
}

}  // namespace ember::bench
