// step: one full training step of the 784-256-128-10 MLP (forward, cross-entropy, backward, SGD) on
// the host, on the device with the batch already there, and on the device with the batch's H2D copy;
// and the non-finite guard's check of a step (ember train runs one per step), as a share of each step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/suites.h"
#include "core/cuda_runtime.h"
#include "core/guard.h"
#include "nn/nn.h"
#include "models/architecture.h"
#include "optim/optimizer.h"

namespace ember::bench {

namespace {

const std::vector<int64_t> kSizes = {784, 256, 128, 10};

int64_t weight_count() {
  int64_t w = 0;
  for (size_t l = 0; l + 1 < kSizes.size(); ++l) w += kSizes[l] * kSizes[l + 1];
  return w;
}

// The GEMM FLOPs of one sample's step: forward, dW and dX of every layer (2 per multiply-add), except the first
// layer's dX, which ember train skips (its input is data) as PyTorch does.
int64_t step_flops_per_sample() { return 2 * (3 * weight_count() - kSizes[0] * kSizes[1]); }

// A model, its optimizer and loss: everything one step touches, on one device.
struct Trainer {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::SGD> optimizer;
  nn::CrossEntropyLoss loss;

  explicit Trainer(Device device) {
    Generator generator(1234);  // the same weights on every device
    model = models::make_model(models::Architecture::mlp({kSizes.begin() + 1, kSizes.end() - 1}), device, generator);
    model->set_input_grad(false);  // as ember train: no gradient for the data
    ops::SgdOptions options;
    options.lr = 0.01, options.momentum = 0.9, options.nesterov = true, options.weight_decay = 1e-4;
    optimizer = std::make_unique<optim::SGD>(model->parameters(), options);
  }

  // Returns the loss tensor (on the model's device; reading it would synchronise).
  Tensor step(const Tensor& x, const Tensor& y) {
    optimizer->zero_grad();
    Tensor logits = model->forward(x);
    Tensor l = loss.forward(logits, y);
    model->backward(loss.backward());
    optimizer->step();
    return l;
  }

  // What ember train's guard checks after each step: the loss, then every gradient.
  std::vector<Tensor> watched(const Tensor& l) const {
    std::vector<Tensor> out{l};
    for (const auto& p : model->parameters()) out.push_back(p->grad);
    return out;
  }
};

struct Batch {
  Tensor x, y;
};

Batch make_batch(int64_t B) {
  std::vector<int64_t> labels(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) labels[size_t(i)] = (i * 3 + 1) % 10;
  return {Tensor::rand({B, kSizes[0]}, 99, DType::F32, Device::cpu()), Tensor::from_vector(labels, {B})};
}

const char* kTable = "one training step of the 784-256-128-10 MLP: forward, cross-entropy, backward, SGD "
                     "(FLOPs = 2 B x 503,552: forward, dW and dX GEMMs, no dX for the input)";

Row step_row(int64_t B, const std::string& column, const std::string& device, const char* timer) {
  Row r;
  r.suite = "step";
  r.table = kTable;
  r.name = "mlp_step";
  r.label = "B=" + std::to_string(B);
  r.params = {{"batch", B}};
  r.size = double(B);
  r.column = column;
  r.device = device;
  r.timer = timer;
  r.flops = double(step_flops_per_sample()) * double(B);
  return r;
}

const char* kGuardTable = "non-finite guard: one check of a step's loss and 235,146 gradients (kernels/guard.h); "
                          "its share of each step is in the notes of the step table";

// Times NonFiniteGuard::check over a real step's tensors on `device`; the median, or nothing if unmeasured.
std::optional<double> measure_guard(BenchContext& ctx, Device device, const Batch& batch) {
  Row row;
  row.suite = "step";
  row.table = kGuardTable;
  row.name = "guard_check";
  row.label = "check";
  row.column = device.is_cpu() ? "cpu" : "cuda";
  row.device = device.is_cpu() ? "cpu" : "cuda";
  row.timer = device.is_cpu() ? "steady_clock" : "cuda_events";
  row.bytes = 4.0 * double(1 + weight_count() + 128 + 256 + 10);  // loss, weight and bias gradients, read once
  if (device.is_cuda() && !ctx.cuda()) {
    ctx.add(unmeasured(row, kNoCudaDevice));
    return std::nullopt;
  }
  Trainer trainer(device);
  const std::vector<Tensor> tensors = trainer.watched(trainer.step(batch.x.to(device), batch.y.to(device)));
  NonFiniteGuard guard(device, NonFiniteGuard::Mode::Skip);
  int64_t step = 0;
  auto check = [&] { guard.check(++step, tensors); };
  row = measured(row, device.is_cpu() ? sample_host(check, ctx.timing)
                                      : sample_device(check, *ctx.stream, ctx.timing, ctx.flusher.get()));
  if (guard.report().count != 0) {  // a finite step must pass
    ctx.fail(row, "the guard flagged a finite training step");
    return std::nullopt;
  }
  ctx.add(row);
  return row.stats->median;
}

// "guard check 0.8% of the step" on a measured step row.
void add_guard_share(Row& step_row, std::optional<double> guard_seconds) {
  if (!step_row.measured() || !guard_seconds) return;
  const double pct = 100.0 * *guard_seconds / step_row.stats->median;
  char text[64];
  std::snprintf(text, sizeof text, "%s guard %.2f%% of the step", step_row.device.c_str(), pct);
  step_row.extras.push_back({"guard_pct_of_step", pct, text});
}

void add_throughput(Row& row, int64_t B) {
  if (row.measured()) row.extras.push_back({"samples_per_s", double(B) / row.stats->median, ""});
}

// One step on each side from the same weights and batch: the losses and the updated first-layer
// weights must agree.
std::string verify(const Batch& batch) {
  Trainer host(Device::cpu()), device(Device::cuda(0));
  double host_loss = host.step(batch.x, batch.y).item<float>();
  double device_loss = device.step(batch.x.to(Device::cuda(0)), batch.y.to(Device::cuda(0))).item<float>();
  if (!(std::fabs(host_loss - device_loss) <= 1e-4 * std::max(1.0, std::fabs(host_loss))))
    return mismatch("training step loss on CUDA differs from the CPU", std::fabs(host_loss - device_loss), 1e-4);
  std::vector<float> want = host.model->parameters()[0]->value.to_vector<float>();
  std::vector<float> got = device.model->parameters()[0]->value.to_vector<float>();
  double diff = max_abs_diff(got.data(), want.data(), int64_t(want.size()));
  double tolerance = 1e-4 * std::max(1.0, max_abs(want.data(), int64_t(want.size())));
  if (!(diff <= tolerance)) return mismatch("weights after one CUDA step differ from the CPU's", diff, tolerance);
  return "";
}

}  // namespace

void run_step(BenchContext& ctx) {
  const std::vector<int64_t> batches =
      ctx.emulated() ? std::vector<int64_t>{32, 256}
      : ctx.quick    ? std::vector<int64_t>{32, 256, 2048}
                     : std::vector<int64_t>{32, 64, 128, 256, 512, 1024, 2048, 4096};
  const Device gpu = Device::cuda(0);
  ctx.progress("step: guard");
  const std::optional<double> guard_cpu = measure_guard(ctx, Device::cpu(), make_batch(128));
  const std::optional<double> guard_cuda = measure_guard(ctx, gpu, make_batch(128));
  for (int64_t B : batches) {
    ctx.progress("step: B=" + std::to_string(B));
    Batch batch = make_batch(B);
    Row cpu_row = step_row(B, "cpu", "cpu", "steady_clock");
    Row cuda_row = step_row(B, "cuda (batch on device)", "cuda", "cuda_events");
    Row copies_row = step_row(B, "cuda + H2D (batch from pinned)", "cuda+copies", "steady_clock");
    copies_row.params.push_back({"bus_bytes", int64_t(batch.x.nbytes() + batch.y.nbytes())});

    {
      Trainer host(Device::cpu());
      cpu_row = measured(cpu_row, sample_host([&] { host.step(batch.x, batch.y); }, ctx.timing));
      add_throughput(cpu_row, B);
      add_guard_share(cpu_row, guard_cpu);
    }
    ctx.add(cpu_row);
    if (!ctx.cuda()) {
      ctx.add(unmeasured(cuda_row, kNoCudaDevice));
      ctx.add(unmeasured(copies_row, kNoCudaDevice));
      continue;
    }
    std::string problem = verify(batch);
    if (!problem.empty()) {
      ctx.fail(cuda_row, problem);
      ctx.fail(copies_row, problem);
      continue;
    }
    Trainer device(gpu);
    Tensor x = batch.x.to(gpu), y = batch.y.to(gpu);
    cuda_row = measured(cuda_row, sample_device([&] { device.step(x, y); }, *ctx.stream, ctx.timing, ctx.flusher.get()));
    add_throughput(cuda_row, B);
    add_guard_share(cuda_row, guard_cuda);
    // The batch starts in pinned host memory, as the DataLoader leaves it; the wait at the end is
    // what a caller reading the result would pay.
    Tensor x_pinned = batch.x.pin_memory(), y_pinned = batch.y.pin_memory();
    copies_row = measured(copies_row, sample_host([&] {
      device.step(x_pinned.to(gpu, true), y_pinned.to(gpu, true));
      ctx.stream->synchronize();
    }, ctx.timing));
    add_throughput(copies_row, B);
    if (copies_row.measured()) {
      double speedup = cpu_row.stats->median / copies_row.stats->median;
      char text[64];
      std::snprintf(text, sizeof text, "cuda + H2D %.1fx the host", speedup);
      copies_row.extras.push_back({"speedup_vs_cpu", speedup, text});
    }
    ctx.add(cuda_row);
    ctx.add(copies_row);
  }
}

}  // namespace ember::bench
