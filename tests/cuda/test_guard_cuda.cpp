// CUDA non-finite guard against its CPU twin: state and report after every step of long runs with planted
// NaN/Inf, both modes, the empty list, argument rules, and the optimizer kernels reading a device guard.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "base/cuda_check.h"
#include "base/error.h"
#include "core/guard.h"
#include "core/tensor.h"
#include "kernels/guard.h"
#include "kernels/optim.h"
#include "support/compare.h"
#include "support/data.h"
#include "support/device_array.h"
#include "support/emulated_size.h"

namespace {

using ember::kernels::AdamWParams;
using ember::kernels::GuardReport;
using ember::kernels::GuardState;
using ember::kernels::GuardTensors;
using ember::kernels::kGuardMaxTensors;
using ember::kernels::SgdParams;
using ember::test::DeviceBuffer;
using ember::test::TestStream;
using ember::test::tolerance_for;
namespace cpu = ember::kernels::cpu;
namespace kcuda = ember::kernels::cuda;

// The device guard: zeroed state in device memory, the report in zeroed mapped host memory.
class DeviceGuard {
 public:
  DeviceGuard() {
    CUDA_CHECK(cudaMalloc(&state_, sizeof(GuardState)));
    CUDA_CHECK(cudaMemset(state_, 0, sizeof(GuardState)));
    void* host = nullptr;
    CUDA_CHECK(cudaHostAlloc(&host, sizeof(GuardReport), cudaHostAllocMapped));
    std::memset(host, 0, sizeof(GuardReport));
    host_report_ = static_cast<GuardReport*>(host);
    void* device = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
    device_report_ = static_cast<GuardReport*>(device);
  }
  ~DeviceGuard() {
    cudaFree(state_);
    cudaFreeHost(host_report_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  GuardState* state() const { return state_; }
  GuardReport* device_report() const { return device_report_; }
  void reset() {
    CUDA_CHECK(cudaMemset(state_, 0, sizeof(GuardState)));
    std::memset(host_report_, 0, sizeof(GuardReport));
  }
  void put_state(const GuardState& s) { CUDA_CHECK(cudaMemcpy(state_, &s, sizeof s, cudaMemcpyHostToDevice)); }
  // Read only after a cudaStreamSynchronize of the stream that ran the check.
  GuardState read_state() const {
    GuardState s{};
    CUDA_CHECK(cudaMemcpy(&s, state_, sizeof s, cudaMemcpyDeviceToHost));
    return s;
  }
  GuardReport read_report() const {
    GuardReport r{};
    std::memcpy(&r, host_report_, sizeof r);
    return r;
  }

 private:
  GuardState* state_ = nullptr;
  GuardReport* host_report_ = nullptr;
  GuardReport* device_report_ = nullptr;
};

void require_same(const GuardState& device, const GuardState& host) {
  CHECK(device.skip == host.skip);
  CHECK(device.skipped == host.skipped);
  CHECK(device.mask == host.mask);
  CHECK(device.blocks_done == host.blocks_done);
  CHECK(device.stopped == host.stopped);
  REQUIRE(std::memcmp(&device, &host, sizeof device) == 0);
}

void require_same(const GuardReport& device, const GuardReport& host) {
  CHECK(device.first_step == host.first_step);
  CHECK(device.first_mask == host.first_mask);
  CHECK(device.last_step == host.last_step);
  CHECK(device.count == host.count);
  REQUIRE(std::memcmp(&device, &host, sizeof device) == 0);
}

template <typename T>
bool bits_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// A fresh CPU check of one list: the mask it finds.
template <typename T>
uint64_t cpu_mask(const GuardTensors<T>& list) {
  GuardState s{};
  GuardReport r{};
  cpu::check_finite<T>(list, 1, false, &s, &r);
  return r.first_mask;
}

// A pool of tensors on both sides; each step checks a shuffled selection of them.
template <typename T>
struct Pool {
  std::vector<std::vector<T>> host;
  std::vector<std::unique_ptr<DeviceBuffer<T>>> device;

  explicit Pool(const std::vector<int64_t>& sizes) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      host.push_back(ember::test::random_values<T>(sizes[i], 1000 + static_cast<uint32_t>(i), -1e4, 1e4));
      device.push_back(std::make_unique<DeviceBuffer<T>>(sizes[i]));
      device.back()->upload(host.back());
    }
  }
  int64_t numel(int i) const { return static_cast<int64_t>(host[static_cast<size_t>(i)].size()); }
  void set(int i, int64_t pos, T value) {
    host[static_cast<size_t>(i)][static_cast<size_t>(pos)] = value;
    device[static_cast<size_t>(i)]->set(pos, value);
  }
  GuardTensors<T> host_list(const std::vector<int>& picks) const {
    GuardTensors<T> g{};
    g.count = static_cast<int>(picks.size());
    for (size_t k = 0; k < picks.size(); ++k) {
      const auto& x = host[static_cast<size_t>(picks[k])];
      g.data[k] = x.empty() ? nullptr : x.data();
      g.numel[k] = static_cast<int64_t>(x.size());
    }
    return g;
  }
  GuardTensors<T> device_list(const std::vector<int>& picks) const {
    GuardTensors<T> g{};
    g.count = static_cast<int>(picks.size());
    for (size_t k = 0; k < picks.size(); ++k) {
      g.data[k] = device[static_cast<size_t>(picks[k])]->get();
      g.numel[k] = device[static_cast<size_t>(picks[k])]->size();
    }
    return g;
  }
};

constexpr int64_t kBig = ember::test::gpu_or_emulated(257 * 1031, 3 * 1031);

}  // namespace

TEMPLATE_TEST_CASE("cuda check_finite matches the CPU twin step by step", "[cuda]", float, double) {
  using T = TestType;
  using L = std::numeric_limits<T>;
  const T bad_values[] = {L::quiet_NaN(), L::infinity(), -L::infinity(), -L::quiet_NaN()};
  // 64 tensors: one empty, three large ones, the rest 1, 3 or 1000 elements.
  std::vector<int64_t> sizes{0, kBig, kBig, kBig};
  const int64_t small[] = {1, 3, 1000};
  while (sizes.size() < static_cast<size_t>(kGuardMaxTensors)) sizes.push_back(small[sizes.size() % 3]);
  Pool<T> pool(sizes);
  TestStream stream;

  for (bool sticky : {false, true}) {
    DeviceGuard guard;
    DeviceGuard probe;  // a fresh guard per step: its first_mask is the step's own mask
    GuardState cpu_state{};
    GuardReport cpu_report{};
    std::mt19937 gen(sticky ? 7 : 3);
    const int kSteps = 24;
    int flagged_steps = 0;
    for (int64_t step = 1; step <= kSteps; ++step) {
      // List length: all 64 now and then (bit 63), a single tensor, or anything in between.
      int count = std::uniform_int_distribution<int>(1, kGuardMaxTensors)(gen);
      if (step % 5 == 0) count = kGuardMaxTensors;
      if (step == 3) count = 1;
      std::vector<int> order(static_cast<size_t>(kGuardMaxTensors));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), gen);
      std::vector<int> picks(order.begin(), order.begin() + count);

      // Plant 1-3 non-finite values in flagged steps (steps 2 and 5 always, step 3 never, so both modes show).
      const bool flag = step == 2 || step == 5 || (step != 3 && std::uniform_int_distribution<int>(0, 9)(gen) < 4);
      struct Planted {
        int tensor;
        int64_t pos;
        T keep;
      };
      std::vector<Planted> planted;
      uint64_t expected_mask = 0;
      if (flag) {
        // The empty tensor has nowhere to hide a NaN: plant in the others.
        std::vector<int> slots;
        for (int k = 0; k < count; ++k)
          if (pool.numel(picks[static_cast<size_t>(k)]) > 0) slots.push_back(k);
        const int plants = slots.empty() ? 0 : std::uniform_int_distribution<int>(1, 3)(gen);
        for (int j = 0; j < plants; ++j) {
          int slot = slots[std::uniform_int_distribution<size_t>(0, slots.size() - 1)(gen)];
          // Every other flagged step aims at a large tensor when the list holds one.
          if (j == 0 && step % 2 == 0)
            for (int k : slots)
              if (pool.numel(picks[static_cast<size_t>(k)]) == kBig) slot = k;
          const int t = picks[static_cast<size_t>(slot)];
          const int64_t n = pool.numel(t);
          const int where = std::uniform_int_distribution<int>(0, 3)(gen);
          const int64_t pos = where == 0 ? 0 : where == 1 ? n - 1 : std::uniform_int_distribution<int64_t>(0, n - 1)(gen);
          planted.push_back({t, pos, pool.host[static_cast<size_t>(t)][static_cast<size_t>(pos)]});
          pool.set(t, pos, bad_values[std::uniform_int_distribution<int>(0, 3)(gen)]);
          expected_mask |= ember::kernels::guard_bit(slot);
        }
        // A full list also gets a value in its last non-empty slot, so bit 63 is exercised.
        if (count == kGuardMaxTensors && !slots.empty()) {
          const int slot = slots.back();
          const int t = picks[static_cast<size_t>(slot)];
          const int64_t pos = pool.numel(t) - 1;
          planted.push_back({t, pos, pool.host[static_cast<size_t>(t)][static_cast<size_t>(pos)]});
          pool.set(t, pos, bad_values[static_cast<size_t>(step) % 4]);
          expected_mask |= ember::kernels::guard_bit(slot);
        }
      }
      if (expected_mask != 0) ++flagged_steps;

      INFO((sticky ? "stop" : "skip") << " mode, step " << step << ", " << count << " tensors, mask "
                                      << expected_mask);
      const GuardTensors<T> host_list = pool.host_list(picks);
      REQUIRE(cpu_mask(host_list) == expected_mask);
      cpu::check_finite<T>(host_list, step, sticky, &cpu_state, &cpu_report);
      kcuda::check_finite<T>(pool.device_list(picks), step, sticky, guard.state(), guard.device_report(),
                             stream.get());
      stream.sync();
      const GuardState device_state = guard.read_state();
      require_same(device_state, cpu_state);
      require_same(guard.read_report(), cpu_report);
      probe.reset();
      kcuda::check_finite<T>(pool.device_list(picks), step, sticky, probe.state(), probe.device_report(),
                             stream.get());
      stream.sync();
      REQUIRE(probe.read_report().first_mask == expected_mask);
      REQUIRE(device_state.mask == 0);
      REQUIRE(device_state.blocks_done == 0);
      REQUIRE(device_state.skip == (expected_mask != 0 || (sticky && flagged_steps > 0) ? 1 : 0));

      for (auto it = planted.rbegin(); it != planted.rend(); ++it) pool.set(it->tensor, it->pos, it->keep);
    }
    REQUIRE(flagged_steps >= 3);
    REQUIRE(cpu_report.count == flagged_steps);
  }
}

TEMPLATE_TEST_CASE("cuda check_finite: an empty list closes the step like the CPU twin", "[cuda]", float, double) {
  using T = TestType;
  TestStream stream;
  for (bool sticky : {false, true}) {
    INFO((sticky ? "stop" : "skip") << " mode");
    DeviceGuard guard;
    GuardState cpu_state{};
    GuardReport cpu_report{};
    // Step 1 is flagged (a NaN in the middle of 1000), so step 2 has to clear skip in skip mode.
    std::vector<T> x = ember::test::random_values<T>(1000, 5, -1, 1);
    x[517] = std::numeric_limits<T>::quiet_NaN();
    DeviceBuffer<T> d_x(1000);
    d_x.upload(x);
    GuardTensors<T> host_list{}, device_list{};
    host_list.count = device_list.count = 1;
    host_list.numel[0] = device_list.numel[0] = 1000;
    host_list.data[0] = x.data();
    device_list.data[0] = d_x.get();
    GuardTensors<T> empty{};
    empty.count = 0;
    GuardTensors<T> zero_sized{};
    zero_sized.count = 5;  // null data, zero elements each

    for (int64_t step = 1; step <= 4; ++step) {
      INFO("step " << step);
      const GuardTensors<T>& h = step == 1 ? host_list : step == 3 ? zero_sized : empty;
      const GuardTensors<T>& d = step == 1 ? device_list : step == 3 ? zero_sized : empty;
      cpu::check_finite<T>(h, step, sticky, &cpu_state, &cpu_report);
      kcuda::check_finite<T>(d, step, sticky, guard.state(), guard.device_report(), stream.get());
      stream.sync();
      require_same(guard.read_state(), cpu_state);
      require_same(guard.read_report(), cpu_report);
      REQUIRE(cpu_state.skip == (step == 1 || sticky ? 1 : 0));
    }
  }
}

TEST_CASE("cuda check_finite rejects bad arguments before launching", "[cuda]") {
  DeviceGuard guard;
  DeviceBuffer<float> d(4);
  GuardTensors<float> list{};
  list.count = 1;
  list.data[0] = d.get();
  list.numel[0] = 4;
  REQUIRE_THROWS_AS(kcuda::check_finite<float>(list, 0, false, guard.state(), guard.device_report(), nullptr),
                    ember::ValueError);
  REQUIRE_THROWS_AS(kcuda::check_finite<float>(list, 1, false, nullptr, guard.device_report(), nullptr),
                    ember::InternalError);
  list.count = kGuardMaxTensors + 1;
  REQUIRE_THROWS_AS(kcuda::check_finite<float>(list, 1, false, guard.state(), guard.device_report(), nullptr),
                    ember::InternalError);
  CUDA_CHECK(cudaDeviceSynchronize());
  const GuardState zero{};
  require_same(guard.read_state(), zero);
  require_same(guard.read_report(), GuardReport{});
}

TEMPLATE_TEST_CASE("cuda optimizer kernels: a device guard with skip = 1 leaves everything unchanged", "[cuda]",
                   float, double) {
  using T = TestType;
  TestStream stream;
  DeviceGuard guard;
  guard.put_state(GuardState{1, 2, 0, 0, 1});
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1023}, (int64_t{1} << 20) + 3}) {
    for (int offset : {0, 1}) {
      INFO("n = " << n << ", offset " << offset);
      const std::vector<T> param0 = ember::test::random_values<T>(n, 1, -1, 1),
                           grad = ember::test::random_values<T>(n, 2, -2, 2),
                           state0 = ember::test::random_values<T>(n, 3, 0, 0.5);
      DeviceBuffer<T> d_param(n, offset), d_grad(n, offset), d_a(n, offset), d_b(n, offset);
      d_param.upload(param0);
      d_grad.upload(grad);
      d_a.upload(state0);
      d_b.upload(state0);
      for (bool first : {true, false})
        kcuda::sgd_step<T>(d_param.get(), d_grad.get(), d_a.get(), n,
                           SgdParams<T>{T(0.1), T(0.9), T(0), T(0.01), false, first}, stream.get(), guard.state());
      kcuda::adamw_step<T>(d_param.get(), d_grad.get(), d_a.get(), d_b.get(), n,
                           AdamWParams<T>{T(1e-2), T(0.9), T(0.999), T(1e-8), T(0.05), 4}, stream.get(),
                           guard.state());
      stream.sync();
      REQUIRE(bits_equal(d_param.download(), param0));
      REQUIRE(bits_equal(d_a.download(), state0));
      REQUIRE(bits_equal(d_b.download(), state0));

      // The same launch with skip = 0 does move them, so the checks above can fail.
      guard.put_state(GuardState{0, 2, 0, 0, 1});
      kcuda::adamw_step<T>(d_param.get(), d_grad.get(), d_a.get(), d_b.get(), n,
                           AdamWParams<T>{T(1e-2), T(0.9), T(0.999), T(1e-8), T(0.05), 4}, stream.get(),
                           guard.state());
      stream.sync();
      REQUIRE_FALSE(bits_equal(d_param.download(), param0));
      guard.put_state(GuardState{1, 2, 0, 0, 1});
    }
  }
}

TEMPLATE_TEST_CASE("cuda optimizer kernels with a device guard match the CPU twin with the same guard", "[cuda]",
                   float, double) {
  using T = TestType;
  TestStream stream;
  DeviceGuard guard;
  const AdamWParams<T> base{T(1e-2), T(0.9), T(0.999), T(1e-8), T(0.05), 1};
  for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{1023}, (int64_t{1} << 20) + 3}) {
    for (int offset : {0, 1}) {
      // skipped = 0 takes the host's scalars; skipped > 0 makes the kernel derive them again.
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{5}}) {
        INFO("n = " << n << ", offset " << offset << ", skipped " << k);
        const GuardState g{0, k, 0, 0, k > 0 ? 1u : 0u};
        guard.put_state(g);
        std::vector<T> param = ember::test::random_values<T>(n, 4, -1, 1);
        // Resumed state with |m| <= sqrt(v), as Adam's moments are, so the update stays well conditioned.
        std::vector<T> m = ember::test::random_values<T>(n, 5, -0.05, 0.05);
        std::vector<T> v = ember::test::random_values<T>(n, 6, 0.0025, 0.01);
        std::vector<T> sgd_param = param, buf = m;
        DeviceBuffer<T> d_param(n, offset), d_grad(n, offset), d_m(n, offset), d_v(n, offset), d_sgd(n, offset),
            d_buf(n, offset);
        d_param.upload(param);
        d_m.upload(m);
        d_v.upload(v);
        d_sgd.upload(sgd_param);
        d_buf.upload(buf);
        // Steps 3..5 right after k skipped ones: small steps, where the bias corrections differ most.
        for (int64_t step = 3; step <= 5; ++step) {
          const std::vector<T> grad = ember::test::random_values<T>(n, 70 + static_cast<uint32_t>(step), -2, 2);
          d_grad.upload(grad);
          AdamWParams<T> p = base;
          p.step = step + k;
          const SgdParams<T> sp{T(0.05), T(0.9), T(0.3), T(0.01), false, false};
          cpu::adamw_step<T>(param.data(), grad.data(), m.data(), v.data(), n, p, &g);
          cpu::sgd_step<T>(sgd_param.data(), grad.data(), buf.data(), n, sp, &g);
          kcuda::adamw_step<T>(d_param.get(), d_grad.get(), d_m.get(), d_v.get(), n, p, stream.get(), guard.state());
          kcuda::sgd_step<T>(d_sgd.get(), d_grad.get(), d_buf.get(), n, sp, stream.get(), guard.state());
          stream.sync();
        }
        REQUIRE_CLOSE(d_param.download(), param, tolerance_for<T>());
        REQUIRE_CLOSE(d_m.download(), m, tolerance_for<T>());
        REQUIRE_CLOSE(d_v.download(), v, tolerance_for<T>());
        REQUIRE_CLOSE(d_sgd.download(), sgd_param, tolerance_for<T>());
        REQUIRE_CLOSE(d_buf.download(), buf, tolerance_for<T>());
      }
    }
  }
}

TEMPLATE_TEST_CASE("cuda check_finite then adamw_step on one stream, no host sync in between", "[cuda]", float,
                   double) {
  using T = TestType;
  TestStream stream;
  const int64_t sizes[] = {1000, 3, kBig};
  const AdamWParams<T> base{T(1e-2), T(0.9), T(0.999), T(1e-8), T(0.05), 1};
  for (bool sticky : {false, true}) {
    INFO((sticky ? "stop" : "skip") << " mode");
    DeviceGuard guard;
    GuardState cpu_state{};
    GuardReport cpu_report{};
    std::vector<std::vector<T>> param, m, v;
    std::vector<std::unique_ptr<DeviceBuffer<T>>> d_param, d_grad, d_m, d_v;
    for (size_t i = 0; i < 3; ++i) {
      param.push_back(ember::test::random_values<T>(sizes[i], 30 + static_cast<uint32_t>(i), -1, 1));
      m.emplace_back(static_cast<size_t>(sizes[i]), T(0));
      v.emplace_back(static_cast<size_t>(sizes[i]), T(0));
      for (auto* arrays : {&d_param, &d_grad, &d_m, &d_v}) arrays->push_back(std::make_unique<DeviceBuffer<T>>(sizes[i]));
      d_param[i]->upload(param[i]);
      d_m[i]->upload(m[i]);
      d_v[i]->upload(v[i]);
    }
    for (int64_t step = 1; step <= 8; ++step) {
      INFO("step " << step);
      GuardTensors<T> host_list{}, device_list{};
      host_list.count = device_list.count = 3;
      std::vector<std::vector<T>> grad(3);
      for (size_t i = 0; i < 3; ++i) {
        grad[i] = ember::test::random_values<T>(sizes[i], 90 + static_cast<uint32_t>(10 * step + i), -2, 2);
        // Steps 3 and 6 carry a NaN / an Inf in the large tensor's tail.
        if (i == 2 && (step == 3 || step == 6))
          grad[i][static_cast<size_t>(sizes[i] - 1 - step)] =
              step == 3 ? std::numeric_limits<T>::quiet_NaN() : std::numeric_limits<T>::infinity();
        d_grad[i]->upload(grad[i]);
        host_list.data[i] = grad[i].data();
        host_list.numel[i] = device_list.numel[i] = sizes[i];
        device_list.data[i] = d_grad[i]->get();
      }
      AdamWParams<T> p = base;
      p.step = step;
      cpu::check_finite<T>(host_list, step, sticky, &cpu_state, &cpu_report);
      kcuda::check_finite<T>(device_list, step, sticky, guard.state(), guard.device_report(), stream.get());
      for (size_t i = 0; i < 3; ++i) {
        cpu::adamw_step<T>(param[i].data(), grad[i].data(), m[i].data(), v[i].data(), sizes[i], p, &cpu_state);
        kcuda::adamw_step<T>(d_param[i]->get(), d_grad[i]->get(), d_m[i]->get(), d_v[i]->get(), sizes[i], p,
                             stream.get(), guard.state());
      }
      stream.sync();
      require_same(guard.read_state(), cpu_state);
      require_same(guard.read_report(), cpu_report);
    }
    REQUIRE(cpu_report.count == 2);
    REQUIRE(cpu_report.first_step == 3);
    REQUIRE(cpu_report.first_mask == 4);
    for (size_t i = 0; i < 3; ++i) {
      INFO("tensor " << i);
      const std::vector<T> device = d_param[i]->download();
      REQUIRE(std::all_of(device.begin(), device.end(), [](T x) { return std::isfinite(static_cast<double>(x)); }));
      REQUIRE_CLOSE(device, param[i], tolerance_for<T>());
      REQUIRE_CLOSE(d_m[i]->download(), m[i], tolerance_for<T>());
      REQUIRE_CLOSE(d_v[i]->download(), v[i], tolerance_for<T>());
    }
  }
}

// The guard as the trainer uses it: report() must wait for the checks queued before it (the kernel writes the
// report into pinned memory on the compute stream), while first_bad_step() may trail them.
TEST_CASE("NonFiniteGuard on CUDA: report() sees every check queued before it", "[cuda]") {
  using ember::DType;
  using ember::Tensor;
  const ember::Device gpu = ember::Device::cuda(0);
  ember::NonFiniteGuard guard(gpu, ember::NonFiniteGuard::Mode::Skip);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor fine = Tensor::ones({1000}, DType::F32, gpu);
  guard.check(1, {fine, fine});
  guard.check(2, {fine, Tensor::full({5}, nan, DType::F32, gpu)});
  guard.check(3, {Tensor::full({}, inf, DType::F32, gpu), fine});
  const GuardReport r = guard.report();
  CHECK(r.first_step == 2);
  CHECK(r.first_mask == ember::kernels::guard_bit(1));
  CHECK(r.last_step == 3);
  CHECK(r.count == 2);
  CHECK(guard.first_bad_step() == 2);  // the checks have run: the free read agrees now
}
