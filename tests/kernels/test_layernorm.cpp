// Host layer normalisation against the float64 definition (odd widths, width 1, a transformer-like width, no
// affine), float64 gradient checks of x, weight and bias, dweight/dbias bit-identical at 1 and 2 threads and
// accumulated (+=), and the op's checks in order: device, dtype, shape.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "kernels/layernorm.h"
#include "support/data.h"
#include "support/gradcheck.h"
#include "support/threads.h"

using namespace ember;

namespace {

struct Dims {
  int64_t rows, cols;
};
// Rows not a multiple of 32, width 1, widths around one and two warps, a ViT-like 192 and BERT-base 768.
const std::vector<Dims> kShapes = {{1, 1}, {7, 1}, {33, 5}, {37, 31}, {5, 33}, {65, 77}, {3, 192}, {2, 768}};

struct Reference {
  std::vector<double> y, mean, rstd;
};

// The definition, one row at a time: mean, biased variance, (x - mean) / sqrt(var + eps) * w + b.
Reference layer_norm_reference(const std::vector<double>& x, const std::vector<double>* w, const std::vector<double>* b,
                               Dims d, double eps) {
  Reference r;
  for (int64_t i = 0; i < d.rows; ++i) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < d.cols; ++c) mean += x[i * d.cols + c] / static_cast<double>(d.cols);
    for (int64_t c = 0; c < d.cols; ++c) var += std::pow(x[i * d.cols + c] - mean, 2) / static_cast<double>(d.cols);
    const double rstd = 1 / std::sqrt(var + eps);
    for (int64_t c = 0; c < d.cols; ++c)
      r.y.push_back((x[i * d.cols + c] - mean) * rstd * (w ? (*w)[c] : 1.0) + (b ? (*b)[c] : 0.0));
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
  }
  return r;
}

template <typename T> std::vector<T> cast(const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); }

// Rows with an offset of their own (mean far from 0 in some), so the centring matters.
std::vector<double> input(Dims d, unsigned seed) {
  std::vector<double> x = test::random_values<double>(d.rows * d.cols, seed, -2, 3);
  for (int64_t i = 0; i < d.rows * d.cols; ++i) x[i] += 4.0 * static_cast<double>((i / d.cols) % 3);
  return x;
}

template <typename T> std::vector<double> widen(const std::vector<T>& v) { return {v.begin(), v.end()}; }

template <typename T> void check_forward(Dims d, bool affine) {
  INFO("rows " << d.rows << " cols " << d.cols << " affine " << affine);
  const auto x = cast<T>(input(d, 3)), w = cast<T>(test::random_values<double>(d.cols, 4, 0.5, 1.5)),
             b = cast<T>(test::random_values<double>(d.cols, 5, -0.5, 0.5));
  auto y = test::nans<T>(d.rows * d.cols), mean = test::nans<T>(d.rows), rstd = test::nans<T>(d.rows);
  kernels::cpu::layernorm_forward<T>({x.data(), affine ? w.data() : nullptr, affine ? b.data() : nullptr, y.data(),
                                      mean.data(), rstd.data(), d.rows, d.cols, T(1e-5)});
  const std::vector<double> wr = widen(w), br = widen(b);  // the reference sees the same rounded inputs
  const auto ref = layer_norm_reference(widen(x), affine ? &wr : nullptr, affine ? &br : nullptr, d, 1e-5);
  const test::Tolerance tol = test::reduce_tolerance<T>();
  REQUIRE_CLOSE(y, ref.y, tol);
  REQUIRE_CLOSE(mean, ref.mean, tol);
  REQUIRE_CLOSE(rstd, ref.rstd, tol);
}

// f = sum(layer_norm(x, w, b) * R) in float64 as a function of x, w or b; the analytic gradients come from
// layernorm_backward with dy = R, added to gradients that start at 0.25 (the += contract).
void gradcheck_layer_norm(Dims d, bool affine) {
  INFO("rows " << d.rows << " cols " << d.cols << " affine " << affine);
  const auto x = input(d, 7), w = test::random_values<double>(d.cols, 8, 0.5, 1.5),
             b = test::random_values<double>(d.cols, 9, -0.5, 0.5), r = test::random_values<double>(d.rows * d.cols, 10, -1, 1);
  std::vector<double> y(x.size()), mean(d.rows), rstd(d.rows);
  auto f = [&](const std::vector<double>& xv, const std::vector<double>& wv, const std::vector<double>& bv) {
    kernels::cpu::layernorm_forward<double>({xv.data(), affine ? wv.data() : nullptr, affine ? bv.data() : nullptr,
                                             y.data(), mean.data(), rstd.data(), d.rows, d.cols, 1e-5});
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
    return s;
  };
  f(x, w, b);
  std::vector<double> dx(x.size()), dw(d.cols, 0.25), db(d.cols, 0.25);
  kernels::cpu::layernorm_backward<double>({x.data(), r.data(), affine ? w.data() : nullptr, mean.data(), rstd.data(),
                                            dx.data(), dw.data(), db.data(), d.rows, d.cols});
  for (auto& v : dw) v -= 0.25;
  for (auto& v : db) v -= 0.25;
  REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return f(v, w, b); }), x, dx);
  if (!affine) return;
  REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return f(x, v, b); }), w, dw);
  REQUIRE_GRADCHECK(([&](const std::vector<double>& v) { return f(x, w, v); }), b, db);
}

// dweight, dbias and dx of a backward over `rows` rows at `threads` threads.
template <typename T> std::vector<T> backward_results(Dims d, int threads) {
  test::ThreadsScope scope(threads);
  const auto x = cast<T>(input(d, 11)), dy = test::random_values<T>(d.rows * d.cols, 12, -1, 1),
             w = test::random_values<T>(d.cols, 13, 0.5, 1.5);
  std::vector<T> y(x.size()), mean(d.rows), rstd(d.rows), dx(x.size()), grads(2 * d.cols, T(0));
  kernels::cpu::layernorm_forward<T>({x.data(), w.data(), nullptr, y.data(), mean.data(), rstd.data(), d.rows, d.cols,
                                      T(1e-5)});
  kernels::cpu::layernorm_backward<T>({x.data(), dy.data(), w.data(), mean.data(), rstd.data(), dx.data(),
                                       grads.data(), grads.data() + d.cols, d.rows, d.cols});
  grads.insert(grads.end(), dx.begin(), dx.end());
  return grads;
}

}  // namespace

TEMPLATE_TEST_CASE("cpu layernorm_forward equals the float64 definition", "[kernels][layernorm]", float, double) {
  for (Dims d : kShapes)
    for (bool affine : {true, false}) check_forward<TestType>(d, affine);
}

TEST_CASE("cpu layernorm_backward passes the float64 gradient check", "[kernels][layernorm]") {
  for (Dims d : {Dims{1, 1}, Dims{3, 1}, Dims{5, 13}, Dims{4, 33}, Dims{2, 64}})
    for (bool affine : {true, false}) gradcheck_layer_norm(d, affine);
}

TEMPLATE_TEST_CASE("cpu layernorm_backward's dweight and dbias are the same bits at 1 and 2 threads",
                   "[kernels][layernorm]", float, double) {
  const Dims d{701, 40};  // 204 rows a chunk: four chunks, the last one short
  const std::vector<TestType> one = backward_results<TestType>(d, 1);
  CHECK(one == backward_results<TestType>(d, 2));
  CHECK(one == backward_results<TestType>(d, 2));
  CHECK(one == backward_results<TestType>(d, 1));
}

TEST_CASE("layer_norm checks device, then dtype, then shape", "[core][layernorm]") {
  const Tensor x = Tensor::ones({2, 3});
  const Tensor meta_f64 = Tensor::empty({4}, DType::F64, Device::meta());
  // A weight that is wrong in all three ways names the device; wrong in dtype and shape, the dtype.
  CHECK_THROWS_AS(ops::layer_norm(x, meta_f64, Tensor()), DeviceMismatchError);
  CHECK_THROWS_AS(ops::layer_norm(x, Tensor::ones({4}, DType::F64), Tensor()), DTypeError);
  CHECK_THROWS_WITH(ops::layer_norm(x, Tensor::ones({4}), Tensor()),
                    "layer_norm() expects a contiguous weight of shape [3] for input [2, 3], but got [4]");
  CHECK_THROWS_AS(ops::layer_norm(Tensor::ones({2, 3}, DType::I64), Tensor(), Tensor()), DTypeError);
  CHECK_THROWS_AS(ops::layer_norm(x, Tensor(), Tensor(), -1.0), ValueError);
}

TEST_CASE("layer_norm keeps the leading dims and gives mean and rstd per row", "[core][layernorm]") {
  const Tensor x = Tensor::randn({2, 3, 5}, 3, DType::F64);
  const ops::LayerNormResult r = ops::layer_norm(x, Tensor(), Tensor());
  CHECK(r.output.shape() == Shape{2, 3, 5});
  CHECK(r.mean.shape() == Shape{2, 3});
  CHECK(r.rstd.shape() == Shape{2, 3});
  const ops::LayerNormResult m = ops::layer_norm(Tensor::empty({2, 3, 5}, DType::F32, Device::meta()), Tensor(), Tensor());
  CHECK(m.mean.shape() == Shape{2, 3});
}
