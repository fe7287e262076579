// conv: the default CNN's layers (conv forward, input and weight gradients; BatchNorm2d + ReLU; MaxPool2d; the three
// fused)
// on the host and on the device, each device result checked against the host's, and one whole training step
// of the CNN (forward, cross-entropy, backward, SGD) in samples per second.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/layer_case.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "models/architecture.h"
#include "optim/optimizer.h"

namespace ember::bench {

namespace {

const char* kConvTable = "conv2d of the default CNN, FP32 (FLOPs = 2 N OC C KH KW OH OW)";
const char* kNormTable = "BatchNorm2d + ReLU, MaxPool2d and the three fused at the CNN's shapes (bytes read + written)";

// conv1 (1 -> 32 on 28x28) and conv2 (32 -> 64 on 14x14), 3x3 padding 1, each three ways.
void add_conv_cases(std::vector<LayerCase>& cases, int64_t B) {
  struct Layer {
    const char* name;
    int64_t C, OC, H;
  };
  for (Layer l : {Layer{"conv1", 1, 32, 28}, Layer{"conv2", 32, 64, 14}}) {
    const double flops = 2.0 * double(B * l.OC * l.C * 9 * l.H * l.H);
    const std::string shape = " (" + std::to_string(B) + "," + std::to_string(l.C) + "," + std::to_string(l.H) + "," +
                              std::to_string(l.H) + ") -> " + std::to_string(l.OC);
    const Tensor x = uniform({B, l.C, l.H, l.H}, 1), w = uniform({l.OC, l.C, 3, 3}, 2), b = uniform({l.OC}, 3);
    const Tensor dy = uniform({B, l.OC, l.H, l.H}, 4);
    const ops::Conv2dParams p{1, 1, 1, 1};
    const std::string n = l.name;
    cases.push_back({"conv", kConvTable, n + "_forward", n + " forward" + shape, B, flops, 0, {x, w, b},
                     [p](const std::vector<Tensor>& t) { return ops::conv2d(t[0], t[1], t[2], p); }});
    cases.push_back({"conv", kConvTable, n + "_input_grad", n + " input grad" + shape, B, flops, 0, {dy, w, x},
                     [p](const std::vector<Tensor>& t) { return ops::conv2d_backward_input(t[0], t[1], t[2].shape(), p); }});
    cases.push_back({"conv", kConvTable, n + "_weight_grad", n + " weight grad" + shape, B, flops, 0, {x, dy, w, b},
                     [p](const std::vector<Tensor>& t) {
                       Tensor dw = Tensor::zeros(t[2].shape(), DType::F32, t[0].device());
                       Tensor db = Tensor::zeros(t[3].shape(), DType::F32, t[0].device());
                       ops::conv2d_backward_weight_(dw, db, t[0], t[1], p);
                       return dw;
                     }});
  }
}

void add_norm_pool_cases(std::vector<LayerCase>& cases, int64_t B) {
  for (auto [C, H] : {std::pair<int64_t, int64_t>{32, 28}, {64, 14}}) {
    const Shape s{B, C, H, H};
    const double n = double(shape_numel(s)), f = sizeof(float);
    const std::string shape = " (" + std::to_string(B) + "," + std::to_string(C) + "," + std::to_string(H) + "," +
                              std::to_string(H) + ")";
    const Tensor x = uniform(s, 5), dy = uniform(s, 6), w = uniform({C}, 7), b = uniform({C}, 8);
    cases.push_back({"conv", kNormTable, "bn_relu_forward", "BN+ReLU forward" + shape, B, 0, 3 * n * f, {x, w, b},
                     [](const std::vector<Tensor>& t) {
                       ops::BatchNormState state{Tensor::zeros({t[1].numel()}, DType::F32, t[0].device()),
                                                 Tensor::ones({t[1].numel()}, DType::F32, t[0].device()), Tensor()};
                       return ops::batch_norm(t[0], t[1], t[2], state, true, 0.1, 1e-5, true).output;
                     }});
    // Backward alone: the forward's saved statistics and output are inputs, made once here.
    ops::BatchNormState no_running;
    const ops::BatchNormResult saved = ops::batch_norm(x, w, b, no_running, true, 0.1, 1e-5, true);
    cases.push_back({"conv", kNormTable, "bn_relu_backward", "BN+ReLU backward" + shape, B, 0, 7 * n * f,
                     {x, dy, w, saved.mean, saved.invstd, saved.output},
                     [](const std::vector<Tensor>& t) {
                       Tensor gw = Tensor::zeros(t[2].shape(), DType::F32, t[0].device()), gb = gw.clone();
                       return ops::batch_norm_backward(t[1], t[0], t[2], {t[5], t[3], t[4]}, t[5], true, gw, gb);
                     }});
    const ops::Pool2dParams pool{2, 2, 2, 2, 0, 0};
    cases.push_back({"conv", kNormTable, "maxpool_forward", "MaxPool2d forward" + shape, B, 0, 1.5 * n * f, {x},
                     [pool](const std::vector<Tensor>& t) { return ops::max_pool2d(t[0], pool).output; }});
    // The three fused (the CNN's block): x read twice, the pooled output and argmax written; back, x and the
    // pooled gradient, output and argmax read twice, dx written.
    cases.push_back({"conv", kNormTable, "bn_relu_pool_forward", "BN+ReLU+pool forward" + shape, B, 0, 2.5 * n * f,
                     {x, w, b}, [pool](const std::vector<Tensor>& t) {
                       ops::BatchNormState state{Tensor::zeros({t[1].numel()}, DType::F32, t[0].device()),
                                                 Tensor::ones({t[1].numel()}, DType::F32, t[0].device()), Tensor()};
                       return ops::batch_norm_relu_pool(t[0], t[1], t[2], state, true, 0.1, 1e-5, pool).output;
                     }});
    const ops::BatchNormPoolResult block = ops::batch_norm_relu_pool(x, w, b, no_running, true, 0.1, 1e-5, pool);
    const Tensor dpooled = uniform(block.output.shape(), 9);
    cases.push_back({"conv", kNormTable, "bn_relu_pool_backward", "BN+ReLU+pool backward" + shape, B, 0, 4.5 * n * f,
                     {x, dpooled, w, block.mean, block.invstd, block.output, block.argmax},
                     [pool](const std::vector<Tensor>& t) {
                       Tensor gw = Tensor::zeros(t[2].shape(), DType::F32, t[0].device()), gb = gw.clone();
                       return ops::batch_norm_relu_pool_backward(t[1], t[0], t[2], {t[5], t[6], t[3], t[4]}, pool,
                                                                 true, gw, gb);
                     }});
  }
}

// One SGD step of the default CNN; the loss read back (a synchronisation) only after timing.
void measure_step(BenchContext& ctx, int64_t B, Device device) {
  Row r;
  r.suite = "conv";
  r.table = "one training step of the default CNN (1x28x28-c32-c64-128-10): forward, cross-entropy, backward, SGD";
  r.name = "cnn_step";
  r.label = "B=" + std::to_string(B);
  r.params = {{"batch", B}};
  r.size = double(B);
  r.column = r.device = device.is_cpu() ? "cpu" : "cuda";
  r.timer = device.is_cpu() ? "steady_clock" : "cuda_events";
  if (device.is_cuda() && !ctx.cuda()) return ctx.add(unmeasured(r, kNoCudaDevice));
  ctx.progress("conv: CNN step " + r.label + " on " + r.device);
  Generator generator(1234);
  auto model = models::make_model(models::Architecture::cnn({32, 64}, {128}), device, generator);
  model->set_input_grad(false);  // as in ember train
  optim::SGD sgd(model->parameters(), {.lr = 0.01, .momentum = 0.9, .dampening = 0, .weight_decay = 5e-4, .nesterov = true});
  nn::CrossEntropyLoss loss;
  std::vector<int64_t> labels(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) labels[size_t(i)] = (i * 7 + 3) % 10;
  const Tensor x = Tensor::rand({B, 1, 28, 28}, 9).to(device), y = Tensor::from_vector(labels, {B}).to(device);
  auto step = [&] {
    sgd.zero_grad();
    loss.forward(model->forward(x), y);
    model->backward(loss.backward());
    sgd.step();
  };
  r = measured(r, device.is_cpu() ? sample_host(step, ctx.timing) : sample_device(step, *ctx.stream, ctx.timing, nullptr));
  char text[64];
  std::snprintf(text, sizeof text, "%.0f samples/s", double(B) / r.stats->median);
  r.extras.push_back({"samples_per_second", double(B) / r.stats->median, text});
  ctx.add(r);
}

}  // namespace

void run_conv(BenchContext& ctx) {
  const std::vector<int64_t> batches = ctx.emulated() ? std::vector<int64_t>{8}
                                       : ctx.quick    ? std::vector<int64_t>{128}
                                                      : std::vector<int64_t>{32, 128, 512};
  std::vector<LayerCase> cases;
  for (int64_t B : batches) add_conv_cases(cases, B);
  for (int64_t B : batches) add_norm_pool_cases(cases, B);
  for (const LayerCase& c : cases) measure_layer(ctx, c);
  for (int64_t B : batches) {
    measure_step(ctx, B, Device::cpu());
    measure_step(ctx, B, Device::cuda(0));
  }
}

}  // namespace ember::bench
