// CUDA elementwise, copy/cast and random kernels against their CPU twins (outputs NaN-prefilled).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "base/cuda_check.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/random.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/device_array.h"
#include "support/emulated_size.h"

using namespace ember;
namespace kc = ember::kernels::cpu;
namespace kg = ember::kernels::cuda;

using ember::test::DeviceArray;
using ember::test::nans;

namespace {

template <typename T>
std::vector<T> ramp(int64_t n, double a, double b) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = T(std::sin(a * double(i) + b) * 3.0);
  return v;
}

}  // namespace

TEMPLATE_TEST_CASE("CUDA elementwise kernels equal their CPU twins", "[cuda]", float, double) {
  using T = TestType;
  for (int64_t n : {int64_t(1), int64_t(5), int64_t(257), int64_t(1000003), ember::test::gpu_or_emulated(int64_t(1) << 24, 3)}) {
    INFO("n = " << n);
    auto a = ramp<T>(n, 0.37, 0.1), b = ramp<T>(n, 1.13, 2.0);
    DeviceArray<T> da(a), db(b);
    std::vector<T> want(n);
    auto check = [&](auto cpu_fn, auto gpu_fn) {
      DeviceArray<T> out(nans<T>(n));
      cpu_fn(want.data());
      gpu_fn(out.ptr);
      REQUIRE_CLOSE(out.host(), want, test::kExact);
    };
    check([&](T* o) { kc::add(a.data(), b.data(), o, n); }, [&](T* o) { kg::add(da.ptr, db.ptr, o, n, nullptr); });
    check([&](T* o) { kc::sub(a.data(), b.data(), o, n); }, [&](T* o) { kg::sub(da.ptr, db.ptr, o, n, nullptr); });
    check([&](T* o) { kc::mul(a.data(), b.data(), o, n); }, [&](T* o) { kg::mul(da.ptr, db.ptr, o, n, nullptr); });
    check([&](T* o) { kc::scale(a.data(), T(0.5), o, n); }, [&](T* o) { kg::scale(da.ptr, T(0.5), o, n, nullptr); });
    check([&](T* o) { kc::relu(a.data(), o, n); }, [&](T* o) { kg::relu(da.ptr, o, n, nullptr); });
    check([&](T* o) { kc::relu_backward(a.data(), b.data(), o, n); },
          [&](T* o) { kg::relu_backward(da.ptr, db.ptr, o, n, nullptr); });
    check([&](T* o) { kc::fill(o, n, T(-2)); }, [&](T* o) { kg::fill(o, n, T(-2), nullptr); });
    // axpy accumulates into y: start both from b.
    std::vector<T> y = b;
    DeviceArray<T> dy(b);
    kc::axpy(T(0.25), a.data(), y.data(), n);
    kg::axpy(T(0.25), da.ptr, dy.ptr, n, nullptr);
    REQUIRE_CLOSE(dy.host(), y, test::kF32);  // the GPU may fuse the multiply-add
  }
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {1, 300}, {129, 10}, {4096, 257}}) {
    auto x = ramp<T>(rows * cols, 0.1, 0.0), bias = ramp<T>(cols, 0.7, 1.0);
    DeviceArray<T> dx(x), dbias(bias), out(nans<T>(rows * cols));
    std::vector<T> want(rows * cols);
    kc::add_bias(x.data(), bias.data(), want.data(), rows, cols);
    kg::add_bias(dx.ptr, dbias.ptr, out.ptr, rows, cols, nullptr);
    REQUIRE_CLOSE(out.host(), want, test::kExact);
  }
}

TEST_CASE("CUDA strided_copy and cast equal their CPU twins", "[cuda]") {
  std::vector<float> src = ramp<float>(3 * 5 * 7, 0.3, 0.0);
  DeviceArray<float> dsrc(src);
  kernels::StridedLayout t;  // (7, 5, 3) transpose of a (3, 5, 7) array
  t.ndim = 3;
  t.sizes[0] = 7, t.sizes[1] = 5, t.sizes[2] = 3;
  t.strides[0] = 1, t.strides[1] = 7, t.strides[2] = 35;
  std::vector<float> want(105);
  DeviceArray<float> out(nans<float>(105));
  kc::strided_copy(src.data(), t, want.data(), 105);
  kg::strided_copy(dsrc.ptr, t, out.ptr, 105, nullptr);
  REQUIRE_CLOSE(out.host(), want, test::kExact);

  std::vector<uint8_t> img(28 * 28 * 3 + 1);
  for (size_t i = 0; i < img.size(); ++i) img[i] = uint8_t(i * 7);
  DeviceArray<uint8_t> dimg(img);
  DeviceArray<float> f(nans<float>(int64_t(img.size())));
  std::vector<float> fw(img.size());
  kc::cast(img.data(), fw.data(), int64_t(img.size()), 1.0 / 255);
  kg::cast(dimg.ptr, f.ptr, int64_t(img.size()), 1.0 / 255, nullptr);
  REQUIRE_CLOSE(f.host(), fw, test::kExact);
}

TEMPLATE_TEST_CASE("Same seed gives the same random numbers on CPU and CUDA", "[cuda]", float, double) {
  using T = TestType;
  for (int64_t n : {int64_t(1), int64_t(3), int64_t(4099), int64_t(1) << 20}) {
    for (uint64_t offset : {uint64_t(0), uint64_t(5)}) {
      std::vector<T> want(n);
      DeviceArray<T> out(nans<T>(n));
      kc::uniform(want.data(), n, 2026, offset, T(-0.5), T(0.25));
      kg::uniform(out.ptr, n, 2026, offset, T(-0.5), T(0.25), nullptr);
      REQUIRE_CLOSE(out.host(), want, test::kExact);  // bitwise for uniform

      DeviceArray<T> nout(nans<T>(n));
      kc::normal(want.data(), n, 7, offset, T(1), T(2));
      kg::normal(nout.ptr, n, 7, offset, T(1), T(2), nullptr);
      // libm and CUDA math may differ in the last bit of log/cos.
      REQUIRE_CLOSE(nout.host(), want, (sizeof(T) == 4 ? test::kF32 : test::Tolerance{1e-12, 1e-12}));

      DeviceArray<T> mout(nans<T>(n));
      kc::dropout_mask(want.data(), n, 11, offset, T(0.3));
      kg::dropout_mask(mout.ptr, n, 11, offset, T(0.3), nullptr);
      REQUIRE_CLOSE(mout.host(), want, test::kExact);
    }
  }
}
