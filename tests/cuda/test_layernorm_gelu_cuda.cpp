// CUDA layer normalisation and GELU against their CPU twins (NaN-prefilled outputs): rows that are not a multiple
// of the 4 rows a block holds, width 1, widths around one warp, a block of columns and a transformer width;
// dweight/dbias bit-identical run to run; GELU in both forms out to |x| = 1e4. Small shapes: the emulated device
// runs every thread as a fiber. The whole modules on cuda:0: their float64 gradient checks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "nn/nn.h"
#include "support/data.h"
#include "support/device_array.h"
#include "support/emulated_size.h"
#include "support/gradcheck.h"

namespace kc = ember::kernels::cpu;
namespace kg = ember::kernels::cuda;

using ember::kernels::GeluApproximate;
using ember::test::DeviceArray;
using ember::test::nans;
using ember::test::random_values;

namespace {

struct Dims {
  int64_t rows, cols;
};
const std::vector<Dims> kShapes = {{1, 1}, {7, 1}, {5, 31}, {9, 33}, {33, 77}, {3, 192}, {2, 769}};

template <typename T> struct LayerNormRun {
  std::vector<T> y, mean, rstd, dx, dweight, dbias;
};

// Forward then backward on the CPU (device = false) or the CUDA twins, from the same inputs; dweight and dbias
// start at 0.5 to check that backward adds.
template <typename T> LayerNormRun<T> run_layer_norm(Dims d, bool affine, bool device) {
  const int64_t n = d.rows * d.cols;
  const auto x = random_values<T>(n, 41, -2, 3), dy = random_values<T>(n, 42, -1, 1),
             w = random_values<T>(d.cols, 43, 0.5, 1.5), b = random_values<T>(d.cols, 44, -0.5, 0.5);
  LayerNormRun<T> r{nans<T>(n), nans<T>(d.rows), nans<T>(d.rows), nans<T>(n), std::vector<T>(d.cols, T(0.5)),
                    std::vector<T>(d.cols, T(0.5))};
  if (!device) {
    kc::layernorm_forward<T>({x.data(), affine ? w.data() : nullptr, affine ? b.data() : nullptr, r.y.data(),
                              r.mean.data(), r.rstd.data(), d.rows, d.cols, T(1e-5)});
    kc::layernorm_backward<T>({x.data(), dy.data(), affine ? w.data() : nullptr, r.mean.data(), r.rstd.data(),
                               r.dx.data(), r.dweight.data(), r.dbias.data(), d.rows, d.cols});
    return r;
  }
  DeviceArray<T> x_d(x), dy_d(dy), w_d(w), b_d(b), y_d(r.y), mean_d(r.mean), rstd_d(r.rstd), dx_d(r.dx),
      dw_d(r.dweight), db_d(r.dbias);
  kg::layernorm_forward<T>({x_d.ptr, affine ? w_d.ptr : nullptr, affine ? b_d.ptr : nullptr, y_d.ptr, mean_d.ptr,
                            rstd_d.ptr, d.rows, d.cols, T(1e-5)},
                           nullptr);
  kg::layernorm_backward<T>({x_d.ptr, dy_d.ptr, affine ? w_d.ptr : nullptr, mean_d.ptr, rstd_d.ptr, dx_d.ptr,
                             dw_d.ptr, db_d.ptr, d.rows, d.cols},
                            nullptr);
  return {y_d.host(), mean_d.host(), rstd_d.host(), dx_d.host(), dw_d.host(), db_d.host()};
}

}  // namespace

TEMPLATE_TEST_CASE("CUDA layernorm forward and backward equal the CPU twin", "[cuda][layernorm]", float, double) {
  using T = TestType;
  const ember::test::Tolerance tol = ember::test::reduce_tolerance<T>();
  for (Dims d : kShapes)
    for (bool affine : {true, false}) {
      INFO("rows " << d.rows << " cols " << d.cols << " affine " << affine);
      const LayerNormRun<T> want = run_layer_norm<T>(d, affine, false), got = run_layer_norm<T>(d, affine, true);
      REQUIRE_CLOSE(got.y, want.y, tol);
      REQUIRE_CLOSE(got.mean, want.mean, tol);
      REQUIRE_CLOSE(got.rstd, want.rstd, tol);
      REQUIRE_CLOSE(got.dx, want.dx, tol);
      REQUIRE_CLOSE(got.dweight, want.dweight, tol);
      REQUIRE_CLOSE(got.dbias, want.dbias, tol);
    }
}

TEST_CASE("CUDA layernorm dweight and dbias are the same bits run to run", "[cuda][layernorm]") {
  const Dims d{ember::test::gpu_or_emulated(4099, 257), 45};  // rows span every slice unevenly, two column blocks
  const LayerNormRun<float> first = run_layer_norm<float>(d, true, true);
  for (int i = 0; i < 2; ++i) {
    const LayerNormRun<float> again = run_layer_norm<float>(d, true, true);
    CHECK(again.dweight == first.dweight);
    CHECK(again.dbias == first.dbias);
    CHECK(again.dx == first.dx);
  }
}

TEMPLATE_TEST_CASE("CUDA gelu and gelu_backward equal the CPU twin in both forms", "[cuda][gelu]", float, double) {
  using T = TestType;
  for (GeluApproximate form : {GeluApproximate::None, GeluApproximate::Tanh})
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, ember::test::gpu_or_emulated(70001, 4099)}) {
      INFO("tanh " << (form == GeluApproximate::Tanh) << " n " << n);
      auto x = random_values<T>(n, 45, -8, 8);
      const std::vector<T> extremes = {T(-1e4), T(-30), T(-10), T(10), T(30), T(1e4)};
      for (size_t i = 0; i < extremes.size() && i < x.size(); ++i) x[i] = extremes[i];
      const auto dy = random_values<T>(n, 46, -1, 1);
      std::vector<T> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
      kc::gelu<T>(x.data(), y.data(), n, form);
      kc::gelu_backward<T>(dy.data(), x.data(), dx.data(), n, form);
      DeviceArray<T> x_d(x), dy_d(dy), y_d(nans<T>(n)), dx_d(nans<T>(n));
      kg::gelu<T>(x_d.ptr, y_d.ptr, n, form, nullptr);
      kg::gelu_backward<T>(dy_d.ptr, x_d.ptr, dx_d.ptr, n, form, nullptr);
      REQUIRE_CLOSE(y_d.host(), y, ember::test::tolerance_for<T>());
      REQUIRE_CLOSE(dx_d.host(), dx, ember::test::tolerance_for<T>());
    }
}

TEST_CASE("LayerNorm and GELU pass the float64 gradient check on cuda:0", "[cuda][layernorm][gelu]") {
  using namespace ember;
  const Device cuda = Device::cuda(0);
  nn::LayerNorm norm(5, 1e-5, true, DType::F64, cuda);
  norm.weight()->value.copy_from(Tensor::rand({5}, 31, DType::F64, cuda, 0.5, 1.5));
  const Tensor x = Tensor::randn({2, 3, 5}, 33, DType::F64).to(cuda);
  norm.zero_grad();
  const Tensor y = norm.forward(x);
  const Tensor r = Tensor::randn(y.shape(), 17, DType::F64).to(cuda);
  const Tensor dx = norm.backward(r);
  auto f = [&](Tensor& target) {
    return [&](const std::vector<double>& v) {
      Tensor saved = target.clone();
      target.copy_from(Tensor::from_vector(v, target.shape()).to(cuda));
      const double s = ops::sum(ops::mul(norm.forward(x), r)).item<double>();
      target.copy_from(saved);
      return s;
    };
  };
  Tensor input = x;
  REQUIRE_GRADCHECK(f(input), x.to_vector<double>(), dx.to_vector<double>());
  REQUIRE_GRADCHECK(f(norm.weight()->value), norm.weight()->value.to_vector<double>(),
                    norm.weight()->grad.to_vector<double>());
  REQUIRE_GRADCHECK(f(norm.bias()->value), norm.bias()->value.to_vector<double>(), norm.bias()->grad.to_vector<double>());
  nn::GELU gelu("tanh");
  gelu.forward(x);
  const Tensor g = gelu.backward(r);
  auto fg = [&](const std::vector<double>& v) {
    return ops::sum(ops::mul(gelu.forward(Tensor::from_vector(v, x.shape()).to(cuda)), r)).item<double>();
  };
  REQUIRE_GRADCHECK(fg, x.to_vector<double>(), g.to_vector<double>());
}
