// step: one full training step of the 784-256-128-10 MLP (forward, cross-entropy, backward, SGD) on
// the host, on the device with the batch already there, and on the device with the batch's H2D copy.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/suites.h"
#include "core/cuda_runtime.h"
#include "nn/nn.h"
#include "train/checkpoint.h"
#include "train/optim.h"

namespace ember::bench {

namespace {

const std::vector<int64_t> kSizes = {784, 256, 128, 10};

int64_t weight_count() {
  int64_t w = 0;
  for (size_t l = 0; l + 1 < kSizes.size(); ++l) w += kSizes[l] * kSizes[l + 1];
  return w;
}

// A model, its optimizer and loss: everything one step touches, on one device.
struct Trainer {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::SGD> optimizer;
  nn::CrossEntropyLoss loss;

  explicit Trainer(Device device) {
    Generator generator(1234);  // the same weights on every device
    model = train::make_mlp(kSizes, device, generator);
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
                     "(FLOPs = 6 B x 234,752 weights)";

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
  r.flops = 6.0 * double(B) * double(weight_count());
  return r;
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
      ctx.quick ? std::vector<int64_t>{32, 256, 2048} : std::vector<int64_t>{32, 64, 128, 256, 512, 1024, 2048, 4096};
  const Device gpu = Device::cuda(0);
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
    cuda_row = measured(cuda_row, sample_device([&] { device.step(x, y); }, ctx.stream, ctx.timing, ctx.flusher.get()));
    add_throughput(cuda_row, B);
    // The batch starts in pinned host memory, as the DataLoader leaves it; the wait at the end is
    // what a caller reading the result would pay.
    Tensor x_pinned = batch.x.pin_memory(), y_pinned = batch.y.pin_memory();
    copies_row = measured(copies_row, sample_host([&] {
      device.step(x_pinned.to(gpu, true), y_pinned.to(gpu, true));
      cuda::runtime::stream_synchronize(ctx.stream);
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
