// measure_layer: the host run, then the device run checked against it, then both timed.
#include "bench/layer_case.h"

#include <algorithm>

namespace ember::bench {

namespace {

Row layer_row(const LayerCase& c, const std::string& device) {
  Row r;
  r.suite = c.suite;
  r.table = c.table;
  r.name = c.name;
  r.label = c.label;
  r.params = {{"batch", c.batch}};
  r.size = double(c.batch);
  r.column = device;
  r.device = device;
  r.timer = device == "cpu" ? "steady_clock" : "cuda_events";
  r.flops = c.flops;
  r.bytes = c.bytes;
  return r;
}

}  // namespace

Tensor uniform(const Shape& s, uint64_t seed) { return Tensor::rand(s, seed, DType::F32, Device::cpu(), -1, 1); }

void measure_layer(BenchContext& ctx, const LayerCase& c) {
  ctx.progress(c.suite + ": " + c.label);
  const Tensor host_out = c.run(c.inputs);
  ctx.add(measured(layer_row(c, "cpu"), sample_host([&] { c.run(c.inputs); }, ctx.timing)));
  Row cuda_row = layer_row(c, "cuda");
  if (!ctx.cuda()) {
    ctx.add(unmeasured(cuda_row, kNoCudaDevice));
    return;
  }
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : c.inputs) on_gpu.push_back(t.to(Device::cuda(0)));
  const std::vector<float> got = c.run(on_gpu).to_vector<float>();
  const double tolerance = 1e-3 * std::max(1.0, max_abs(host_out.data<float>(), host_out.numel()));
  const double diff = max_abs_diff(got.data(), host_out.data<float>(), host_out.numel());
  if (!(diff <= tolerance)) return ctx.fail(cuda_row, mismatch(c.label + ": CUDA differs from the host", diff, tolerance));
  ctx.add(measured(cuda_row, sample_device([&] { c.run(on_gpu); }, *ctx.stream, ctx.timing, ctx.flusher.get())));
}

}  // namespace ember::bench
