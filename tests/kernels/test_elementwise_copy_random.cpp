// CPU elementwise, copy/cast and random kernels against plain references.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/philox.h"
#include "kernels/random.h"
#include "support/compare.h"

using namespace ember;
namespace kc = ember::kernels::cpu;

TEMPLATE_TEST_CASE("CPU elementwise kernels match scalar references", "[kernels]", float, double) {
  using T = TestType;
  for (int64_t n : {1, 7, 64, 1001}) {
    std::vector<T> a(n), b(n), out(n, std::numeric_limits<T>::quiet_NaN());
    for (int64_t i = 0; i < n; ++i) a[i] = T(i % 13) - T(6.5), b[i] = T(0.25) * T(i % 7) - T(0.5);
    std::vector<T> want(n);
    kc::add(a.data(), b.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
    REQUIRE(out == want);
    kc::sub(a.data(), b.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) want[i] = a[i] - b[i];
    REQUIRE(out == want);
    kc::mul(a.data(), b.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) want[i] = a[i] * b[i];
    REQUIRE(out == want);
    kc::scale(a.data(), T(-3), out.data(), n);
    for (int64_t i = 0; i < n; ++i) want[i] = T(-3) * a[i];
    REQUIRE(out == want);
    kc::relu(a.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) want[i] = a[i] > 0 ? a[i] : T(0);
    REQUIRE(out == want);
    std::vector<T> grad(n);
    kc::relu_backward(b.data(), out.data(), grad.data(), n);
    for (int64_t i = 0; i < n; ++i) REQUIRE(grad[i] == (a[i] > 0 ? b[i] : T(0)));
    std::vector<T> y = b;
    kc::axpy(T(2), a.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) REQUIRE(y[i] == b[i] + T(2) * a[i]);
    kc::fill(out.data(), n, T(1.5));
    REQUIRE(out == std::vector<T>(n, T(1.5)));
  }
  // add_bias broadcasts over rows, including a single row and a single column.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 5}, {4, 1}, {3, 7}}) {
    std::vector<T> x(rows * cols), bias(cols), out(rows * cols, std::numeric_limits<T>::quiet_NaN());
    for (int64_t i = 0; i < rows * cols; ++i) x[i] = T(i);
    for (int64_t c = 0; c < cols; ++c) bias[c] = T(100 * (c + 1));
    kc::add_bias(x.data(), bias.data(), out.data(), rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) REQUIRE(out[r * cols + c] == x[r * cols + c] + bias[c]);
  }
}

TEST_CASE("CPU strided_copy gathers any view in row-major order", "[kernels]") {
  // A (2, 3, 4) array viewed as its (4, 3, 2) transpose, and a sliced view with a step.
  std::vector<int32_t> src(24);
  for (int i = 0; i < 24; ++i) src[i] = i;
  kernels::StridedLayout t;
  t.ndim = 3;
  int64_t sizes[3] = {4, 3, 2}, strides[3] = {1, 4, 12};
  for (int d = 0; d < 3; ++d) t.sizes[d] = sizes[d], t.strides[d] = strides[d];
  std::vector<int32_t> dst(24, -1);
  kc::strided_copy(src.data(), t, dst.data(), 24);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) REQUIRE(dst[(i * 3 + j) * 2 + k] == k * 12 + j * 4 + i);

  kernels::StridedLayout s;  // rows 0..1 of a (2, 12) array, every third column
  s.ndim = 2;
  s.sizes[0] = 2, s.sizes[1] = 4, s.strides[0] = 12, s.strides[1] = 3;
  std::vector<int32_t> d2(8, -1);
  kc::strided_copy(src.data(), s, d2.data(), 8);
  CHECK(d2 == std::vector<int32_t>{0, 3, 6, 9, 12, 15, 18, 21});

  kernels::StridedLayout scalar;  // 0-d
  int32_t one = -1;
  kc::strided_copy(src.data() + 5, scalar, &one, 1);
  CHECK(one == 5);
}

TEST_CASE("CPU cast converts between dtypes and scales images", "[kernels]") {
  std::vector<uint8_t> img = {0, 1, 128, 255};
  std::vector<float> f(4);
  kc::cast(img.data(), f.data(), 4, 1.0 / 255);
  for (int i = 0; i < 4; ++i) CHECK(f[i] == Approx(img[i] / 255.0).epsilon(1e-6));
  std::vector<double> d = {-1.75, 2.5, 300.9};
  std::vector<int64_t> l(3);
  kc::cast(d.data(), l.data(), 3, 1.0);
  CHECK(l == std::vector<int64_t>{-1, 2, 300});
  std::vector<int32_t> i32(3);
  kc::cast(l.data(), i32.data(), 3, 2.0);
  CHECK(i32 == std::vector<int32_t>{-2, 4, 600});
}

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[kernels]") {
  // Known answers from the Random123 distribution (kat_vectors), for counter (c0, c1, 0, 0)
  // and key (k0, k1): zero counter and key.
  auto r = kernels::philox4x32_10(0, 0);
  CHECK(r.v[0] == 0x6627e8d5u);
  CHECK(r.v[1] == 0xe169c58du);
  CHECK(r.v[2] == 0xbc57ac4cu);
  CHECK(r.v[3] == 0x9b00dbd8u);
}

// kernels/random.h fixes which stream words each value uses; the moments above cannot see two normals sharing a word.
TEST_CASE("CPU random kernels use the stream words random.h names: offset + i, normal offset + 2i and 2i + 1",
          "[kernels]") {
  const uint64_t seed = 77, offset = 10;
  const int64_t n = 301;
  std::vector<double> u(2 * n);  // low 0, high 1: each value is its word scaled to [0, 1), exactly
  kc::uniform(u.data(), 2 * n, seed, offset, 0.0, 1.0);
  for (int64_t i = 0; i < 2 * n; ++i)
    REQUIRE(u[i] == kernels::uniform_double(kernels::philox_word(seed, offset + static_cast<uint64_t>(i))));

  std::vector<double> z(n), shifted(n - 5);
  kc::normal(z.data(), n, seed, offset, 0.5, 2.0);
  for (int64_t i = 0; i < n; ++i) {
    const double box_muller = std::sqrt(-2.0 * std::log(1.0 - u[2 * i])) * std::cos(6.283185307179586 * u[2 * i + 1]);
    REQUIRE(z[i] == Approx(0.5 + 2.0 * box_muller).epsilon(1e-12).margin(1e-12));
  }
  // Five values further on the stream are ten words further: the stream continues where z's fifth value stood.
  kc::normal(shifted.data(), n - 5, seed, offset + 10, 0.5, 2.0);
  REQUIRE(shifted == std::vector<double>(z.begin() + 5, z.end()));
  std::vector<float> zf(n);
  kc::normal(zf.data(), n, seed, offset, 0.5f, 2.0f);
  for (int64_t i = 0; i < n; ++i) REQUIRE(zf[i] == static_cast<float>(z[i]));  // computed in double, then rounded

  std::vector<float> uf(n), mask(n);
  kc::uniform(uf.data(), n, seed, offset, 0.f, 1.f);
  kc::dropout_mask(mask.data(), n, seed, offset, 0.3f);
  for (int64_t i = 0; i < n; ++i) REQUIRE(mask[i] == (uf[i] >= 0.3f ? 1.f / (1.f - 0.3f) : 0.f));
}

TEST_CASE("CPU random kernels: uniform range, normal moments, dropout mask", "[kernels]") {
  const int64_t n = 100000;
  std::vector<float> u(n);
  kc::uniform(u.data(), n, 123, 0, -2.f, 3.f);
  double mean = 0;
  for (float v : u) {
    REQUIRE(v >= -2.f);
    REQUIRE(v < 3.f);
    mean += v;
  }
  CHECK(mean / n == Approx(0.5).margin(0.03));

  std::vector<double> z(n);
  kc::normal(z.data(), n, 9, 0, 0.0, 1.0);
  double m = 0, m2 = 0;
  for (double v : z) m += v, m2 += v * v;
  m /= n;
  CHECK(m == Approx(0).margin(0.02));
  CHECK(std::sqrt(m2 / n - m * m) == Approx(1).epsilon(0.02));

  std::vector<float> mask(n);
  kc::dropout_mask(mask.data(), n, 5, 0, 0.25f);
  int64_t kept = 0;
  for (float v : mask) {
    REQUIRE((v == 0.f || v == Approx(1 / 0.75f)));
    kept += v != 0.f;
  }
  CHECK(double(kept) / n == Approx(0.75).margin(0.01));
}
