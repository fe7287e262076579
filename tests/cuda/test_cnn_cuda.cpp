// CUDA conv2d, max_pool2d and batch_norm against their CPU twins (NaN-prefilled outputs, gradients that
// accumulate, shapes past every tile edge and the default CNN's own), and a CNN on the GPU against the CPU.
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/batchnorm.h"
#include "kernels/conv.h"
#include "kernels/pool.h"
#include "nn/nn.h"
#include "support/cnn_gradcheck.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/device_array.h"

namespace kc = ember::kernels::cpu;
namespace kg = ember::kernels::cuda;
using ember::kernels::BatchNormGeometry;
using ember::kernels::Conv2dGeometry;
using ember::kernels::Pool2dGeometry;
using ember::test::DeviceArray;
using ember::test::nans;
using ember::test::random_values;

namespace {

// Batch 1, odd sizes, strides, padding, 1x1 and whole-input kernels, channels past the 64-wide tile,
// reductions past the split-K slice, and the default CNN's two layers at batch 16 (7 and 2 split-K slices; batch
// 128 is slow on the emulated device). The 1x300x300 image has 90000 reduction steps: split-K's cap of 32 slices
// (which batch 128 of conv1 hits) with a last slice shorter than the others.
const std::vector<Conv2dGeometry> kConvShapes = {
    {1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0},      {1, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1},   {2, 2, 9, 8, 3, 3, 2, 2, 2, 1, 0},
    {3, 5, 6, 6, 7, 1, 1, 1, 1, 0, 0},      {2, 3, 5, 4, 2, 7, 6, 1, 1, 1, 1},   {1, 2, 11, 13, 5, 5, 3, 3, 2, 2, 1},
    {3, 70, 9, 9, 65, 3, 3, 1, 1, 1, 1},    {40, 3, 13, 11, 5, 3, 3, 1, 1, 1, 1}, {0, 3, 5, 5, 2, 3, 3, 1, 1, 1, 1},
    {16, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1},  {16, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1}, {1, 1, 300, 300, 2, 3, 3, 1, 1, 1, 1},
};

template <typename T> void check_conv(const Conv2dGeometry& g) {
  CAPTURE(g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.stride_h, g.stride_w, g.pad_h, g.pad_w);
  const int64_t nx = g.N * g.C * g.H * g.W, ny = g.N * g.OC * g.OH() * g.OW(), nw = g.OC * g.CKK();
  const auto x = random_values<T>(nx, 1, -1, 1), w = random_values<T>(nw, 2, -1, 1), b = random_values<T>(g.OC, 3, -1, 1);
  const auto dy = random_values<T>(ny, 4, -1, 1);
  DeviceArray<T> dx_in(x), dw_in(w), db_in(b), ddy(dy);
  const auto tol = ember::test::gemm_tolerance<T>(g.CKK() + g.N * g.OH() * g.OW());

  std::vector<T> y(static_cast<size_t>(ny));
  kc::conv2d_forward<T>(g, x.data(), w.data(), b.data(), y.data());
  DeviceArray<T> y_d(nans<T>(ny));
  kg::conv2d_forward<T>(g, dx_in.ptr, dw_in.ptr, db_in.ptr, y_d.ptr, nullptr);
  REQUIRE_CLOSE(y_d.host(), y, tol);

  std::vector<T> dx(static_cast<size_t>(nx));
  kc::conv2d_backward_input<T>(g, dy.data(), w.data(), dx.data());
  DeviceArray<T> dx_d(nans<T>(nx));
  kg::conv2d_backward_input<T>(g, ddy.ptr, dw_in.ptr, dx_d.ptr, nullptr);
  REQUIRE_CLOSE(dx_d.host(), dx, tol);

  std::vector<T> dw(static_cast<size_t>(nw), T(0.5)), db(static_cast<size_t>(g.OC), T(-0.25));  // they accumulate
  kc::conv2d_backward_weight<T>(g, x.data(), dy.data(), dw.data(), db.data());
  DeviceArray<T> dw_d(std::vector<T>(static_cast<size_t>(nw), T(0.5))), db_d(std::vector<T>(static_cast<size_t>(g.OC), T(-0.25)));
  DeviceArray<T> workspace(nans<T>(static_cast<int64_t>(kg::conv2d_backward_weight_workspace_elems(g))));
  kg::conv2d_backward_weight<T>(g, dx_in.ptr, ddy.ptr, dw_d.ptr, db_d.ptr, workspace.ptr, nullptr);
  REQUIRE_CLOSE(dw_d.host(), dw, tol);
  REQUIRE_CLOSE(db_d.host(), db, tol);
}

template <typename T> void check_pool(const Pool2dGeometry& g) {
  CAPTURE(g.N, g.C, g.H, g.W, g.KH, g.KW, g.stride_h, g.stride_w, g.pad_h, g.pad_w);
  const int64_t nx = g.N * g.C * g.H * g.W, ny = g.N * g.C * g.OH() * g.OW();
  auto x = random_values<T>(nx, 5, -3, 3);
  for (auto& v : x) v = static_cast<T>(static_cast<int>(v * 2)) / 2;  // ties: the first must win on both
  const auto dy = random_values<T>(ny, 6, -1, 1);
  std::vector<T> y(static_cast<size_t>(ny)), dx(static_cast<size_t>(nx));
  std::vector<int32_t> argmax(static_cast<size_t>(ny));
  kc::max_pool2d_forward<T>(g, x.data(), y.data(), argmax.data());
  kc::max_pool2d_backward<T>(g, dy.data(), argmax.data(), dx.data());
  DeviceArray<T> x_d(x), y_d(nans<T>(ny)), dy_d(dy), dx_d(nans<T>(nx));
  DeviceArray<int32_t> argmax_d(std::vector<int32_t>(static_cast<size_t>(ny), -9));
  kg::max_pool2d_forward<T>(g, x_d.ptr, y_d.ptr, argmax_d.ptr, nullptr);
  REQUIRE_CLOSE(y_d.host(), y, ember::test::kExact);
  REQUIRE(argmax_d.host() == argmax);
  kg::max_pool2d_backward<T>(g, dy_d.ptr, argmax_d.ptr, dx_d.ptr, nullptr);
  REQUIRE_CLOSE(dx_d.host(), dx, ember::test::kExact);  // the same windows summed in the same order
}

template <typename T> void check_batch_norm(const BatchNormGeometry& g, bool relu) {
  CAPTURE(g.N, g.C, g.HW, relu);
  const int64_t n = g.N * g.C * g.HW;
  const auto x = random_values<T>(n, 7, -2, 3), dy = random_values<T>(n, 8, -1, 1);
  const auto w = random_values<T>(g.C, 9, 0.5, 1.5), b = random_values<T>(g.C, 10, -0.5, 0.5);
  const auto rm0 = random_values<T>(g.C, 11, -0.2, 0.2), rv0 = random_values<T>(g.C, 12, 0.5, 2);
  const auto tol = ember::test::reduce_tolerance<T>();
  DeviceArray<T> x_d(x), dy_d(dy), w_d(w), b_d(b), rm_d(rm0), rv_d(rv0);
  DeviceArray<int64_t> count_d(std::vector<int64_t>{5});
  // Training forward: outputs, saved statistics, running statistics, the batch count.
  std::vector<T> y(static_cast<size_t>(n)), mean(g.C), invstd(g.C), rm = rm0, rv = rv0;
  int64_t count = 5;
  kc::batch_norm_forward_train<T>(g, {x.data(), w.data(), b.data(), y.data(), mean.data(), invstd.data(), rm.data(),
                                      rv.data(), &count, T(0.1), T(1e-5), relu});
  DeviceArray<T> y_d(nans<T>(n)), mean_d(nans<T>(g.C)), invstd_d(nans<T>(g.C));
  kg::batch_norm_forward_train<T>(g, {x_d.ptr, w_d.ptr, b_d.ptr, y_d.ptr, mean_d.ptr, invstd_d.ptr, rm_d.ptr, rv_d.ptr,
                                      count_d.ptr, T(0.1), T(1e-5), relu}, nullptr);
  REQUIRE_CLOSE(y_d.host(), y, tol);
  REQUIRE_CLOSE(mean_d.host(), mean, tol);
  REQUIRE_CLOSE(invstd_d.host(), invstd, tol);
  REQUIRE_CLOSE(rm_d.host(), rm, tol);
  REQUIRE_CLOSE(rv_d.host(), rv, tol);
  CHECK(count_d.host()[0] == 6);
  // Backward of that forward; parameter gradients accumulate onto 1.
  std::vector<T> dx(static_cast<size_t>(n)), dw(g.C, T(1)), db(g.C, T(1));
  kc::batch_norm_backward<T>(g, {x.data(), dy.data(), w.data(), mean.data(), invstd.data(), relu ? y.data() : nullptr,
                                 dx.data(), dw.data(), db.data(), true});
  DeviceArray<T> dx_d(nans<T>(n)), dw_d(std::vector<T>(g.C, T(1))), db_d(std::vector<T>(g.C, T(1)));
  kg::batch_norm_backward<T>(g, {x_d.ptr, dy_d.ptr, w_d.ptr, mean_d.ptr, invstd_d.ptr, relu ? y_d.ptr : nullptr, dx_d.ptr,
                                 dw_d.ptr, db_d.ptr, true}, nullptr);
  REQUIRE_CLOSE(dx_d.host(), dx, tol);
  REQUIRE_CLOSE(dw_d.host(), dw, tol);
  REQUIRE_CLOSE(db_d.host(), db, tol);
  // Eval forward and its backward, with the running statistics the training step left.
  std::vector<T> ye(static_cast<size_t>(n)), inv_e(g.C), dxe(static_cast<size_t>(n)), dwe(g.C, T(0)), dbe(g.C, T(0));
  kc::batch_norm_forward_eval<T>(g, x.data(), w.data(), b.data(), rm.data(), rv.data(), T(1e-5), relu, ye.data(), inv_e.data());
  kc::batch_norm_backward<T>(g, {x.data(), dy.data(), w.data(), rm.data(), inv_e.data(), relu ? ye.data() : nullptr,
                                 dxe.data(), dwe.data(), dbe.data(), false});
  DeviceArray<T> ye_d(nans<T>(n)), inv_e_d(nans<T>(g.C)), dxe_d(nans<T>(n)), dwe_d(std::vector<T>(g.C, T(0))), dbe_d(std::vector<T>(g.C, T(0)));
  kg::batch_norm_forward_eval<T>(g, x_d.ptr, w_d.ptr, b_d.ptr, rm_d.ptr, rv_d.ptr, T(1e-5), relu, ye_d.ptr, inv_e_d.ptr, nullptr);
  REQUIRE_CLOSE(ye_d.host(), ye, tol);
  REQUIRE_CLOSE(inv_e_d.host(), inv_e, tol);
  kg::batch_norm_backward<T>(g, {x_d.ptr, dy_d.ptr, w_d.ptr, rm_d.ptr, inv_e_d.ptr, relu ? ye_d.ptr : nullptr, dxe_d.ptr,
                                 dwe_d.ptr, dbe_d.ptr, false}, nullptr);
  REQUIRE_CLOSE(dxe_d.host(), dxe, tol);
  REQUIRE_CLOSE(dwe_d.host(), dwe, tol);
  REQUIRE_CLOSE(dbe_d.host(), dbe, tol);
}

}  // namespace

TEMPLATE_TEST_CASE("CUDA conv2d forward and gradients equal the CPU twin", "[cuda]", float, double) {
  for (const auto& g : kConvShapes) check_conv<TestType>(g);
}

TEMPLATE_TEST_CASE("CUDA max_pool2d forward (argmax included) and backward equal the CPU twin", "[cuda]", float, double) {
  for (const Pool2dGeometry& g : {Pool2dGeometry{2, 3, 8, 8, 2, 2, 2, 2, 0, 0}, Pool2dGeometry{1, 2, 7, 5, 2, 2, 2, 2, 0, 0},
                                  Pool2dGeometry{2, 2, 9, 9, 3, 3, 2, 2, 1, 1}, Pool2dGeometry{1, 1, 6, 7, 3, 2, 1, 2, 1, 1},
                                  Pool2dGeometry{0, 2, 4, 4, 2, 2, 2, 2, 0, 0}, Pool2dGeometry{16, 32, 28, 28, 2, 2, 2, 2, 0, 0}})
    check_pool<TestType>(g);
}

TEMPLATE_TEST_CASE("CUDA batch_norm (train, eval, backward, fused ReLU) equals the CPU twin", "[cuda]", float, double) {
  for (const BatchNormGeometry& g : {BatchNormGeometry{4, 3, 25}, BatchNormGeometry{1, 2, 9}, BatchNormGeometry{5, 7, 1},
                                     BatchNormGeometry{3, 70, 13}, BatchNormGeometry{16, 32, 784}})
    for (bool relu : {false, true}) check_batch_norm<TestType>(g, relu);
}

TEST_CASE("A CNN on the GPU computes what it computes on the CPU, buffers included", "[cuda]") {
  using namespace ember;
  auto make = [](Device device) {
    Generator gen(4);
    return std::make_shared<nn::Sequential>(
        std::make_shared<nn::Conv2d>(1, 8, 3, 1, 1, true, DType::F32, device, gen), std::make_shared<nn::BatchNorm2d>(8),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(8 * 14 * 14, 10, true, DType::F32, device, gen));
  };
  auto cpu = make(Device::cpu()), gpu = make(Device::cpu());
  gpu->to(Device::cuda(0));
  for (const auto& [name, b] : gpu->named_buffers()) CHECK(b.device() == Device::cuda(0));
  const Tensor x = Tensor::rand({16, 1, 28, 28}, 8);
  const Tensor y = Tensor::from_vector<int64_t>(std::vector<int64_t>(16, 3), {16});
  nn::CrossEntropyLoss ce_cpu, ce_gpu;
  const double loss_cpu = ce_cpu.forward(cpu->forward(x), y).item<float>();
  const double loss_gpu = ce_gpu.forward(gpu->forward(x.to(Device::cuda(0))), y.to(Device::cuda(0))).item<float>();
  CHECK(loss_gpu == Approx(loss_cpu).epsilon(1e-5));
  const Tensor dx_cpu = cpu->backward(ce_cpu.backward()), dx_gpu = gpu->backward(ce_gpu.backward());
  REQUIRE_CLOSE(dx_gpu.to_vector<float>(), dx_cpu.to_vector<float>(), ember::test::kF32Reduce);
  const auto sc = cpu->state_dict(), sg = gpu->state_dict();
  for (size_t i = 0; i < sc.size(); ++i) {
    INFO(sc[i].first);
    const Tensor a = sc[i].second.to(DType::F64), b = sg[i].second.to(Device::cpu()).to(DType::F64);
    REQUIRE_CLOSE(b.to_vector<double>(), a.to_vector<double>(), ember::test::kF32Reduce);
  }
  const auto pc = cpu->named_parameters(), pg = gpu->named_parameters();
  for (size_t i = 0; i < pc.size(); ++i) {
    INFO(pc[i].first);
    REQUIRE_CLOSE(pg[i].second->grad.to_vector<float>(), pc[i].second->grad.to_vector<float>(), ember::test::kF32Reduce);
  }
}

TEST_CASE("Float64 gradient check of a strided, padded CNN on CUDA, BatchNorm in both modes", "[cuda]") {
  ember::test::gradcheck_cnn_on(ember::Device::cuda(0));
}
