// Whole-model checks: one SGD step equals PyTorch's numbers, a finite-difference gradient check of
// an MLP, and training a small MLP to >= 98% on two spirals.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "core/ops.h"
#include "nn/nn.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "optim/optimizer.h"

using namespace ember;
using namespace ember::nn;

namespace {
#include "nn/torch_step_fixture.inc"

std::vector<double> fill(int64_t n, double a, double b, double scale = 0.5) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(a * double(i) + b) * scale;
  return v;
}

template <size_t N>
std::vector<double> vec(const double (&a)[N]) { return std::vector<double>(a, a + N); }

std::vector<double> to_f64(const Tensor& t) { return t.to(DType::F64).to_vector<double>(); }
}  // namespace

TEST_CASE("One forward + backward + SGD step equals PyTorch's reference numbers", "[nn]") {
  for (DType dtype : {DType::F64, DType::F32}) {
    INFO(dtype_name(dtype));
    const test::Tolerance tol = dtype == DType::F64 ? test::Tolerance{1e-12, 1e-10} : test::kF32Reduce;
    auto model = std::make_shared<Sequential>(std::make_shared<Linear>(7, 5, true, dtype),
                                              std::make_shared<ReLU>(), std::make_shared<Linear>(5, 3, true, dtype));
    auto params = model->named_parameters();
    auto set = [&](int i, std::vector<double> v) {
      params[i].second->value.copy_from(Tensor::from_vector(v, params[i].second->value.shape()).to(dtype));
    };
    set(0, fill(35, 0.37, 0.1));
    set(1, fill(5, 1.3, 0.2));
    set(2, fill(15, 0.71, 0.3));
    set(3, fill(3, 2.1, 0.4));
    std::vector<double> xv = fill(28, 0.53, 0.5, 1.0);
    Tensor x = Tensor::from_vector(xv, {4, 7}).to(dtype);
    Tensor y = Tensor::from_vector<int64_t>({0, 2, 1, 2}, {4});

    optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 5e-4, .nesterov = true});
    CrossEntropyLoss ce;
    sgd.zero_grad();
    Tensor logits = model->forward(x);
    double loss = ce.forward(logits, y).item_as_double();
    model->backward(ce.backward());
    REQUIRE_CLOSE(to_f64(logits), vec(kTorchLogits), tol);
    CHECK(loss == Approx(kTorchLoss).epsilon(dtype == DType::F64 ? 1e-12 : 1e-6));
    REQUIRE_CLOSE(to_f64(params[0].second->grad), vec(kTorchGrad_0_weight), tol);
    REQUIRE_CLOSE(to_f64(params[1].second->grad), vec(kTorchGrad_0_bias), tol);
    REQUIRE_CLOSE(to_f64(params[2].second->grad), vec(kTorchGrad_2_weight), tol);
    REQUIRE_CLOSE(to_f64(params[3].second->grad), vec(kTorchGrad_2_bias), tol);
    sgd.step();
    REQUIRE_CLOSE(to_f64(params[0].second->value), vec(kTorchAfter_0_weight), tol);
    REQUIRE_CLOSE(to_f64(params[1].second->value), vec(kTorchAfter_0_bias), tol);
    REQUIRE_CLOSE(to_f64(params[2].second->value), vec(kTorchAfter_2_weight), tol);
    REQUIRE_CLOSE(to_f64(params[3].second->value), vec(kTorchAfter_2_bias), tol);
  }
}

TEST_CASE("Whole-MLP gradient check: 784 -> 32 -> 10 in float64", "[nn]") {
  manual_seed(11);
  const int64_t B = 3;
  auto model = std::make_shared<Sequential>(std::make_shared<Linear>(784, 32, true, DType::F64),
                                            std::make_shared<ReLU>(), std::make_shared<Linear>(32, 10, true, DType::F64));
  Tensor x = Tensor::rand({B, 784}, 5, DType::F64);
  Tensor y = Tensor::from_vector<int64_t>({3, 0, 9}, {B});
  CrossEntropyLoss ce;
  model->zero_grad();
  ce.forward(model->forward(x), y);
  Tensor dx = model->backward(ce.backward());

  // loss as a function of one parameter tensor (or of the input), the rest held fixed
  auto loss_with = [&](Tensor& target, const std::vector<double>& values) {
    Tensor saved = target.clone();
    target.copy_from(Tensor::from_vector(values, target.shape()));
    CrossEntropyLoss l;
    double v = l.forward(model->forward(x), y).item<double>();
    target.copy_from(saved);
    return v;
  };
  for (auto& [name, p] : model->named_parameters()) {
    INFO(name);
    std::vector<double> values = p->value.to_vector<double>();
    std::vector<size_t> indices;  // every element of the small tensors, a spread sample of 0.weight
    for (size_t i = 0; i < values.size(); i += values.size() > 2000 ? 97 : 1) indices.push_back(i);
    REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return loss_with(p->value, v); }), values,
                      p->grad.to_vector<double>(), indices);
  }
  Tensor xin = x;
  std::vector<size_t> sample;
  for (size_t i = 0; i < size_t(B * 784); i += 13) sample.push_back(i);
  REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return loss_with(xin, v); }), x.to_vector<double>(),
                    dx.to_vector<double>(), sample);
}

namespace {

// Two interleaved spirals, n points each, labels 0 and 1.
void spirals(int64_t n, double noise_seed_offset, std::vector<float>& xy, std::vector<int64_t>& labels) {
  Tensor noise = Tensor::randn({2 * n, 2}, 99, DType::F32, Device::cpu(), 0, 0.02, uint64_t(noise_seed_offset));
  auto nz = noise.to_vector<float>();
  xy.clear();
  labels.clear();
  for (int64_t i = 0; i < n; ++i) {
    double t = 0.25 + 2.75 * M_PI * double(i) / double(n);  // 0.25 .. 3 pi
    double r = t / (3 * M_PI);
    for (int c = 0; c < 2; ++c) {
      double sign = c == 0 ? 1 : -1;
      int64_t k = 2 * i + c;
      xy.push_back(float(sign * r * std::cos(t) + nz[2 * k]));
      xy.push_back(float(sign * r * std::sin(t) + nz[2 * k + 1]));
      labels.push_back(c);
    }
  }
}

}  // namespace

TEST_CASE("A small MLP learns two spirals to >= 98% accuracy on CPU", "[nn]") {
  manual_seed(0);
  auto model = std::make_shared<Sequential>(std::make_shared<Linear>(2, 64), std::make_shared<ReLU>(),
                                            std::make_shared<Linear>(64, 64), std::make_shared<ReLU>(),
                                            std::make_shared<Linear>(64, 2));
  std::vector<float> xy;
  std::vector<int64_t> labels;
  spirals(200, 0, xy, labels);
  Tensor x = Tensor::from_vector(xy, {400, 2}), y = Tensor::from_vector(labels, {400});
  optim::AdamW opt(model->parameters(), {.lr = 0.01, .weight_decay = 0});
  CrossEntropyLoss ce;
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 1500; ++step) {
    opt.zero_grad();
    double loss = ce.forward(model->forward(x), y).item<float>();
    model->backward(ce.backward());
    opt.step();
    if (step == 0) first_loss = loss;
    last_loss = loss;
  }
  std::vector<float> test_xy;
  std::vector<int64_t> test_labels;
  spirals(500, 4000, test_xy, test_labels);  // fresh points with fresh noise
  Tensor tx = Tensor::from_vector(test_xy, {1000, 2}), ty = Tensor::from_vector(test_labels, {1000});
  model->eval();
  double accuracy = double(ops::count_correct(model->forward(tx), ty).item<int64_t>()) / 1000.0;
  INFO("loss " << first_loss << " -> " << last_loss << ", held-out accuracy " << accuracy);
  CHECK(last_loss < 0.1 * first_loss);
  CHECK(accuracy >= 0.98);
}
