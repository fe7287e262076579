// CUDA SGD / AdamW kernels against their CPU twins: packed and scalar paths, tails, several steps, f32 and f64.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/optim.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/device_array.h"

namespace {

using ember::kernels::AdamWParams;
using ember::kernels::SgdParams;
using ember::test::DeviceBuffer;
using ember::test::TestStream;
using ember::test::tolerance_for;

const int64_t kSizes[] = {1, 3, 4, 5, 1023, (int64_t{1} << 20) + 3};

// Element offsets of (param, grad, state): all aligned (packed path), all shifted, only grad shifted.
struct Offsets {
  const char* name;
  int param, grad, state;
};
const Offsets kOffsets[] = {{"aligned", 0, 0, 0}, {"all misaligned", 1, 1, 1}, {"grad misaligned", 0, 1, 0}};

constexpr int kSteps = 3;

struct SgdCase {
  const char* name;
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};
const SgdCase kSgdCases[] = {
    {"plain (no buffer)", 0.1, 0, 0, 0, false},
    {"momentum + dampening + weight decay", 0.05, 0.9, 0.3, 0.01, false},
    {"nesterov + weight decay", 0.05, 0.9, 0, 0.1, true},
};

}  // namespace

TEMPLATE_TEST_CASE("cuda sgd_step matches the CPU twin", "[cuda]", float, double) {
  using T = TestType;
  TestStream stream;
  for (const SgdCase& c : kSgdCases) {
    const bool momentum = c.momentum != 0;
    for (int64_t n : kSizes) {
      for (const Offsets& o : kOffsets) {
        INFO(c.name << ", n = " << n << ", " << o.name);
        std::vector<T> param = ember::test::random_values<T>(n, 1 + static_cast<uint32_t>(n), -1, 1);
        // NaN in the buffer: the first step must write it without reading it, on both sides.
        std::vector<T> buf(static_cast<size_t>(n), std::numeric_limits<T>::quiet_NaN());
        DeviceBuffer<T> d_param(n, o.param), d_grad(n, o.grad), d_buf(n, o.state);
        d_param.upload(param);
        d_buf.upload(buf);
        for (int step = 0; step < kSteps; ++step) {
          const std::vector<T> grad = ember::test::random_values<T>(n, 50 + static_cast<uint32_t>(step), -2, 2);
          d_grad.upload(grad);
          const SgdParams<T> p{static_cast<T>(c.lr),           static_cast<T>(c.momentum), static_cast<T>(c.dampening),
                               static_cast<T>(c.weight_decay), c.nesterov,                 step == 0};
          ember::kernels::cpu::sgd_step<T>(param.data(), grad.data(), momentum ? buf.data() : nullptr, n, p);
          ember::kernels::cuda::sgd_step<T>(d_param.get(), d_grad.get(), momentum ? d_buf.get() : nullptr, n, p,
                                            stream.get());
          stream.sync();
        }
        REQUIRE_CLOSE(d_param.download(), param, tolerance_for<T>());
        if (momentum) REQUIRE_CLOSE(d_buf.download(), buf, tolerance_for<T>());
      }
    }
  }
}

TEMPLATE_TEST_CASE("cuda adamw_step matches the CPU twin", "[cuda]", float, double) {
  using T = TestType;
  TestStream stream;
  const AdamWParams<T> base{static_cast<T>(1e-2), static_cast<T>(0.9), static_cast<T>(0.999), static_cast<T>(1e-8),
                            static_cast<T>(0.05), 1};
  for (int64_t n : kSizes) {
    for (const Offsets& o : kOffsets) {
      INFO("n = " << n << ", " << o.name);
      std::vector<T> param = ember::test::random_values<T>(n, 3 + static_cast<uint32_t>(n), -1, 1);
      std::vector<T> m(static_cast<size_t>(n), T(0)), v(static_cast<size_t>(n), T(0));
      DeviceBuffer<T> d_param(n, o.param), d_grad(n, o.grad), d_m(n, o.state), d_v(n, o.state);
      d_param.upload(param);
      d_m.upload(m);
      d_v.upload(v);
      for (int64_t step = 1; step <= kSteps; ++step) {
        const std::vector<T> grad = ember::test::random_values<T>(n, 70 + static_cast<uint32_t>(step), -2, 2);
        d_grad.upload(grad);
        AdamWParams<T> p = base;
        p.step = step;
        ember::kernels::cpu::adamw_step<T>(param.data(), grad.data(), m.data(), v.data(), n, p);
        ember::kernels::cuda::adamw_step<T>(d_param.get(), d_grad.get(), d_m.get(), d_v.get(), n, p, stream.get());
        stream.sync();
      }
      REQUIRE_CLOSE(d_param.download(), param, tolerance_for<T>());
      REQUIRE_CLOSE(d_m.download(), m, tolerance_for<T>());
      REQUIRE_CLOSE(d_v.download(), v, tolerance_for<T>());
    }
  }
}

TEST_CASE("cuda optimizer launchers reject invalid hyper-parameters before launching", "[cuda]") {
  DeviceBuffer<float> d(1, 0);
  REQUIRE_THROWS_AS(ember::kernels::cuda::sgd_step<float>(d.get(), d.get(), d.get(), 1,
                                                          {0.1f, 0.9f, 0.1f, 0, true, true}, nullptr),
                    ember::ValueError);
  REQUIRE_THROWS_AS(ember::kernels::cuda::sgd_step<float>(d.get(), d.get(), nullptr, 1,
                                                          {0.1f, 0.9f, 0, 0, false, true}, nullptr),
                    ember::InternalError);
  REQUIRE_THROWS_AS(ember::kernels::cuda::adamw_step<float>(d.get(), d.get(), d.get(), d.get(), 1,
                                                            {1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0}, nullptr),
                    ember::ValueError);
  // n = 0 launches nothing, so null pointers are fine.
  ember::kernels::cuda::adamw_step<float>(nullptr, nullptr, nullptr, nullptr, 0, {1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1},
                                          nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
}
