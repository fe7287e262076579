// CPU non-finite guard: the scan finds every NaN/Inf at every position, the step state machine, the argument
// rules, and the optimizer kernels' skip / bias-correction contract with a guard.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"
#include "kernels/guard.h"
#include "kernels/optim.h"
#include "support/data.h"

namespace {

using ember::kernels::AdamWParams;
using ember::kernels::GuardReport;
using ember::kernels::GuardState;
using ember::kernels::GuardTensors;
using ember::kernels::kGuardMaxTensors;
using ember::kernels::SgdParams;
namespace cpu = ember::kernels::cpu;
using ember::test::random_values;


// The non-finite values a scan must catch: NaNs with other payloads and signs count too.
template <typename T>
std::vector<T> nonfinite_values() {
  using L = std::numeric_limits<T>;
  return {L::quiet_NaN(), -L::quiet_NaN(), L::signaling_NaN(), L::infinity(), -L::infinity()};
}

// Finite values whose bit patterns sit next to the non-finite ones (largest exponent) or look odd.
template <typename T>
std::vector<T> edge_finite_values() {
  using L = std::numeric_limits<T>;
  return {L::max(), -L::max(), L::lowest(), L::min(), -L::min(), L::denorm_min(), -L::denorm_min(),
          L::min() / 2,  T(0), -T(0), T(1), T(-1), L::epsilon(), std::nextafter(L::max(), T(0))};
}

template <typename T>
struct List {
  std::vector<std::vector<T>> tensors;
  GuardTensors<T> view() const {
    GuardTensors<T> g{};
    g.count = static_cast<int>(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      g.data[i] = tensors[i].empty() ? nullptr : tensors[i].data();
      g.numel[i] = static_cast<int64_t>(tensors[i].size());
    }
    return g;
  }
};

// One check on a fresh state: the mask the step reports (first_mask, since it is the first step).
template <typename T>
uint64_t mask_of(const GuardTensors<T>& list) {
  GuardState s{};
  GuardReport r{};
  cpu::check_finite<T>(list, 1, false, &s, &r);
  const bool flagged = r.first_mask != 0;
  REQUIRE(s.skip == (flagged ? 1 : 0));
  REQUIRE(r.first_step == (flagged ? 1 : 0));
  REQUIRE(r.count == (flagged ? 1 : 0));
  return r.first_mask;
}

template <typename T>
bool bits_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

bool same(const GuardState& a, const GuardState& b) {
  return a.skip == b.skip && a.skipped == b.skipped && a.mask == b.mask && a.blocks_done == b.blocks_done &&
         a.stopped == b.stopped;
}
bool same(const GuardReport& a, const GuardReport& b) {
  return a.first_step == b.first_step && a.first_mask == b.first_mask && a.last_step == b.last_step &&
         a.count == b.count;
}

std::vector<int64_t> scan_lengths() {
  std::vector<int64_t> out;
  for (int64_t n = 1; n <= 40; ++n) out.push_back(n);
  out.push_back(1000);
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("check_finite: a NaN or Inf at any position of a lone tensor sets bit 0", "[kernels]", float,
                   double) {
  using T = TestType;
  for (int64_t n : scan_lengths()) {
    std::vector<T> x = random_values<T>(n, 5 + static_cast<uint32_t>(n), -3, 3);
    List<T> list{{x}};
    REQUIRE(mask_of(list.view()) == 0);
    for (T bad : nonfinite_values<T>()) {
      for (int64_t pos = 0; pos < n; ++pos) {
        INFO("n = " << n << ", position " << pos << ", value " << static_cast<double>(bad));
        list.tensors[0][static_cast<size_t>(pos)] = bad;
        REQUIRE(mask_of(list.view()) == 1);
        list.tensors[0][static_cast<size_t>(pos)] = x[static_cast<size_t>(pos)];
      }
    }
  }
}

TEMPLATE_TEST_CASE("check_finite: a NaN or Inf in tensor i of several sets exactly bit i", "[kernels]", float,
                   double) {
  using T = TestType;
  const std::vector<T> values = nonfinite_values<T>();
  for (int64_t n : scan_lengths()) {
    // Neighbours of other lengths (one empty) around the tensor under test, which moves through every slot.
    const int64_t others[] = {7, 0, 1000, 1, 33};
    const int slots = 6;
    for (int slot = 0; slot < slots; ++slot) {
      List<T> list;
      for (int i = 0, k = 0; i < slots; ++i) {
        const int64_t len = i == slot ? n : others[k++];
        list.tensors.push_back(random_values<T>(len, 17 + static_cast<uint32_t>(i + 10 * n), -1e3, 1e3));
      }
      REQUIRE(mask_of(list.view()) == 0);
      std::vector<T>& x = list.tensors[static_cast<size_t>(slot)];
      for (int64_t pos = 0; pos < n; ++pos) {
        const T bad = values[static_cast<size_t>(pos) % values.size()];
        INFO("n = " << n << ", slot " << slot << ", position " << pos << ", value " << static_cast<double>(bad));
        const T keep = x[static_cast<size_t>(pos)];
        x[static_cast<size_t>(pos)] = bad;
        REQUIRE(mask_of(list.view()) == (uint64_t{1} << slot));
        x[static_cast<size_t>(pos)] = keep;
      }
    }
  }
}

TEMPLATE_TEST_CASE("check_finite: several flagged tensors set their bits together", "[kernels]", float, double) {
  using T = TestType;
  List<T> list;
  for (int i = 0; i < 10; ++i) list.tensors.push_back(random_values<T>(37 + i, 3 + static_cast<uint32_t>(i), -1, 1));
  list.tensors[2][36] = std::numeric_limits<T>::infinity();
  list.tensors[5][0] = std::numeric_limits<T>::quiet_NaN();
  list.tensors[9][45] = -std::numeric_limits<T>::infinity();
  list.tensors[9][3] = std::numeric_limits<T>::quiet_NaN();
  REQUIRE(mask_of(list.view()) == ((uint64_t{1} << 2) | (uint64_t{1} << 5) | (uint64_t{1} << 9)));
}

TEMPLATE_TEST_CASE("check_finite: extreme finite values, denormals and -0 are finite", "[kernels]", float, double) {
  using T = TestType;
  const std::vector<T> edges = edge_finite_values<T>();
  for (int64_t n : scan_lengths()) {
    INFO("n = " << n);
    std::vector<T> x(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = edges[i % edges.size()];
    List<T> list{{x, x, std::vector<T>(static_cast<size_t>(n), std::numeric_limits<T>::max())}};
    REQUIRE(mask_of(list.view()) == 0);
  }
}

TEMPLATE_TEST_CASE("check_finite: an empty list and zero-length tensors close the step with mask 0", "[kernels]",
                   float, double) {
  using T = TestType;
  for (bool sticky : {false, true}) {
    INFO("sticky " << sticky);
    GuardState s{};
    GuardReport r{};
    // Step 1 is flagged, so step 2 must actively clear skip (skip mode) or keep it (stop mode).
    List<T> bad{{std::vector<T>{T(1), std::numeric_limits<T>::quiet_NaN()}}};
    cpu::check_finite<T>(bad.view(), 1, sticky, &s, &r);
    REQUIRE(s.skip == 1);

    GuardTensors<T> empty{};
    empty.count = 0;
    cpu::check_finite<T>(empty, 2, sticky, &s, &r);
    REQUIRE(s.skip == (sticky ? 1 : 0));
    REQUIRE(s.skipped == 1);
    REQUIRE(r.count == 1);
    REQUIRE(r.last_step == 1);

    GuardTensors<T> zeros{};
    zeros.count = 3;  // null data with zero elements is allowed
    cpu::check_finite<T>(zeros, 3, sticky, &s, &r);
    REQUIRE(s.skip == (sticky ? 1 : 0));
    REQUIRE(s.skipped == 1);
    REQUIRE(s.mask == 0);
    REQUIRE(s.blocks_done == 0);
    REQUIRE(r.first_step == 1);
    REQUIRE(r.first_mask == 1);
    REQUIRE(r.count == 1);
    REQUIRE(r.last_step == 1);
  }
}

TEMPLATE_TEST_CASE("check_finite: the last tensor of a full list sets bit 63", "[kernels]", float, double) {
  using T = TestType;
  STATIC_REQUIRE(kGuardMaxTensors == 64);
  List<T> list;
  for (int i = 0; i < kGuardMaxTensors; ++i)
    list.tensors.push_back(random_values<T>(1 + i % 5, 40 + static_cast<uint32_t>(i), -1, 1));
  REQUIRE(mask_of(list.view()) == 0);
  for (int i : {0, 31, 32, 62, 63}) {
    INFO("tensor " << i);
    list.tensors[static_cast<size_t>(i)].back() = std::numeric_limits<T>::infinity();
    REQUIRE(mask_of(list.view()) == (uint64_t{1} << i));
    list.tensors[static_cast<size_t>(i)].back() = T(0);
  }
  list.tensors[63][0] = std::numeric_limits<T>::quiet_NaN();
  list.tensors[62][0] = std::numeric_limits<T>::quiet_NaN();
  REQUIRE(mask_of(list.view()) == ((uint64_t{1} << 63) | (uint64_t{1} << 62)));
  REQUIRE(ember::kernels::guard_bit(63) == (uint64_t{1} << 63));
  REQUIRE(ember::kernels::guard_bit(64) == (uint64_t{1} << 63));  // later tensors would share bit 63
}

TEMPLATE_TEST_CASE("check_finite: the step state machine in skip and stop mode", "[kernels]", float, double) {
  using T = TestType;
  // Ten steps over four tensors; steps 3, 4 and 8 are flagged, each in different tensors.
  const int64_t kSteps = 10;
  auto bad_tensors = [](int64_t step) -> std::vector<int> {
    if (step == 3) return {1};
    if (step == 4) return {0, 3};
    if (step == 8) return {2};
    return {};
  };
  auto mask_for = [&](int64_t step) {
    uint64_t m = 0;
    for (int t : bad_tensors(step)) m |= uint64_t{1} << t;
    return m;
  };
  for (bool sticky : {false, true}) {
    GuardState s{};
    GuardReport r{};
    int64_t flagged_so_far = 0, last = 0;
    for (int64_t step = 1; step <= kSteps; ++step) {
      INFO((sticky ? "stop" : "skip") << " mode, step " << step);
      List<T> list;
      for (int i = 0; i < 4; ++i)
        list.tensors.push_back(random_values<T>(9 + 4 * i, static_cast<uint32_t>(100 * step + i), -1, 1));
      for (int t : bad_tensors(step)) list.tensors[static_cast<size_t>(t)][static_cast<size_t>(step % 9)] =
          std::numeric_limits<T>::quiet_NaN();
      cpu::check_finite<T>(list.view(), step, sticky, &s, &r);

      const bool flagged = mask_for(step) != 0;
      if (flagged) {
        ++flagged_so_far;
        last = step;
      }
      const bool expect_skip = flagged || (sticky && flagged_so_far > 0);
      REQUIRE(s.skip == (expect_skip ? 1 : 0));
      REQUIRE(s.skipped == flagged_so_far);
      REQUIRE(s.stopped == (flagged_so_far > 0 ? 1u : 0u));
      REQUIRE(s.mask == 0);
      REQUIRE(s.blocks_done == 0);
      REQUIRE(r.first_step == (flagged_so_far > 0 ? 3 : 0));
      REQUIRE(r.first_mask == (flagged_so_far > 0 ? mask_for(3) : 0));
      REQUIRE(r.last_step == last);
      REQUIRE(r.count == flagged_so_far);
    }
  }
}

TEST_CASE("guard_finish: the shared step closer", "[kernels]") {
  using ember::kernels::guard_finish;
  GuardState s{};
  GuardReport r{};
  guard_finish(s, r, 0, 1, false);
  REQUIRE(same(s, GuardState{}));
  REQUIRE(same(r, GuardReport{}));
  guard_finish(s, r, 0x6, 2, false);
  REQUIRE(same(s, GuardState{1, 1, 0, 0, 1}));
  REQUIRE(same(r, GuardReport{2, 0x6, 2, 1}));
  guard_finish(s, r, 0x1, 5, false);
  REQUIRE(same(s, GuardState{1, 2, 0, 0, 1}));
  REQUIRE(same(r, GuardReport{2, 0x6, 5, 2}));
  guard_finish(s, r, 0, 6, false);
  REQUIRE(same(s, GuardState{0, 2, 0, 0, 1}));
  REQUIRE(same(r, GuardReport{2, 0x6, 5, 2}));
  // Stop mode from here on: the earlier non-finite step keeps every later update skipped.
  guard_finish(s, r, 0, 7, true);
  REQUIRE(same(s, GuardState{1, 2, 0, 0, 1}));
  REQUIRE(same(r, GuardReport{2, 0x6, 5, 2}));
}

TEST_CASE("check_finite: argument rules", "[kernels]") {
  std::vector<float> x{1, 2, 3};
  GuardTensors<float> list{};
  list.count = 1;
  list.data[0] = x.data();
  list.numel[0] = 3;
  GuardState s{};
  GuardReport r{};
  SECTION("step 0 and negative steps are user errors") {
    REQUIRE_THROWS_AS(cpu::check_finite<float>(list, 0, false, &s, &r), ember::ValueError);
    REQUIRE_THROWS_AS(cpu::check_finite<float>(list, -3, true, &s, &r), ember::ValueError);
    REQUIRE_THROWS_AS(ember::kernels::detail::check_guard_args(list, 0, &s, &r), ember::ValueError);
  }
  SECTION("more than kGuardMaxTensors tensors") {
    list.count = kGuardMaxTensors + 1;
    REQUIRE_THROWS_AS(cpu::check_finite<float>(list, 1, false, &s, &r), ember::InternalError);
  }
  SECTION("a negative count") {
    list.count = -1;
    REQUIRE_THROWS_AS(cpu::check_finite<float>(list, 1, false, &s, &r), ember::InternalError);
  }
  SECTION("a negative element count, or elements at a null pointer") {
    list.numel[0] = -1;
    REQUIRE_THROWS_AS(cpu::check_finite<float>(list, 1, false, &s, &r), ember::InternalError);
    list.numel[0] = 3;
    list.data[0] = nullptr;
    REQUIRE_THROWS_AS(cpu::check_finite<float>(list, 1, false, &s, &r), ember::InternalError);
  }
  SECTION("no state or no report") {
    REQUIRE_THROWS_AS(cpu::check_finite<float>(list, 1, false, nullptr, &r), ember::InternalError);
    REQUIRE_THROWS_AS(cpu::check_finite<float>(list, 1, false, &s, nullptr), ember::InternalError);
  }
  SECTION("the full list is accepted") {
    list.count = kGuardMaxTensors;  // the others are null with 0 elements
    cpu::check_finite<float>(list, 1, false, &s, &r);
    REQUIRE(s.skip == 0);
  }
  // A rejected call changes nothing.
  REQUIRE(same(s, GuardState{}));
  REQUIRE(same(r, GuardReport{}));
}

TEMPLATE_TEST_CASE("sgd_step / adamw_step with a guard: skip leaves everything bit-identical", "[kernels]", float,
                   double) {
  using T = TestType;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1001}}) {
    INFO("n = " << n);
    const std::vector<T> param0 = random_values<T>(n, 1, -1, 1), grad = random_values<T>(n, 2, -2, 2),
                         state0 = random_values<T>(n, 3, 0, 0.5);
    // skip = 1 whatever the other fields say: a stopped guard with skipped steps too.
    const GuardState skip{1, 3, 0, 0, 1};
    for (bool first : {true, false}) {
      std::vector<T> param = param0, buf = state0;
      cpu::sgd_step<T>(param.data(), grad.data(), buf.data(), n, SgdParams<T>{T(0.1), T(0.9), T(0), T(0.01), true, first},
                       &skip);
      REQUIRE(bits_equal(param, param0));
      REQUIRE(bits_equal(buf, state0));
    }
    std::vector<T> param = param0, m = state0, v = state0;
    cpu::adamw_step<T>(param.data(), grad.data(), m.data(), v.data(), n,
                       AdamWParams<T>{T(1e-2), T(0.9), T(0.999), T(1e-8), T(0.05), 5}, &skip);
    REQUIRE(bits_equal(param, param0));
    REQUIRE(bits_equal(m, state0));
    REQUIRE(bits_equal(v, state0));

    // The same calls with skip = 0 do move them, so the checks above can fail.
    const GuardState run{0, 3, 0, 0, 1};
    cpu::adamw_step<T>(param.data(), grad.data(), m.data(), v.data(), n,
                       AdamWParams<T>{T(1e-2), T(0.9), T(0.999), T(1e-8), T(0.05), 5}, &run);
    REQUIRE_FALSE(bits_equal(param, param0));
    REQUIRE_FALSE(bits_equal(m, state0));
  }
}

TEMPLATE_TEST_CASE("sgd_step with a clear guard equals sgd_step without one, bitwise", "[kernels]", float, double) {
  using T = TestType;
  const int64_t n = 1001;
  const GuardState clear{0, 4, 0, 0, 1};  // skipped steps do not matter to SGD
  for (bool nesterov : {false, true}) {
    std::vector<T> p1 = random_values<T>(n, 4, -1, 1), p2 = p1, b1 = random_values<T>(n, 5, -1, 1), b2 = b1;
    for (int step = 0; step < 3; ++step) {
      const std::vector<T> grad = random_values<T>(n, 6 + static_cast<uint32_t>(step), -2, 2);
      const SgdParams<T> p{T(0.05), T(0.9), T(0), T(0.01), nesterov, step == 0};
      cpu::sgd_step<T>(p1.data(), grad.data(), b1.data(), n, p, &clear);
      cpu::sgd_step<T>(p2.data(), grad.data(), b2.data(), n, p);
    }
    REQUIRE(bits_equal(p1, p2));
    REQUIRE(bits_equal(b1, b2));
  }
}

TEMPLATE_TEST_CASE("adamw_step: skipped steps move the bias corrections back, bitwise", "[kernels]", float, double) {
  using T = TestType;
  const int64_t n = 1001;
  const std::vector<T> param0 = random_values<T>(n, 7, -1, 1), grad = random_values<T>(n, 8, -2, 2),
                       m0 = random_values<T>(n, 9, -0.5, 0.5), v0 = random_values<T>(n, 10, 0, 0.5);
  auto run = [&](int64_t step, const GuardState* guard) {
    std::vector<T> p = param0, m = m0, v = v0;
    cpu::adamw_step<T>(p.data(), grad.data(), m.data(), v.data(), n,
                       AdamWParams<T>{T(1e-2), T(0.9), T(0.999), T(1e-8), T(0.05), step}, guard);
    std::vector<T> out = p;
    out.insert(out.end(), m.begin(), m.end());
    out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  for (int64_t s : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{12}}) {
    for (int64_t k = 0; k < s; ++k) {
      INFO("step " << s << ", skipped " << k);
      const GuardState guard{0, k, 0, 0, k > 0 ? 1u : 0u};
      const std::vector<T> guarded = run(s, &guard);
      REQUIRE(bits_equal(guarded, run(s - k, nullptr)));
      // The bias corrections of step s differ from those of s - k, so ignoring skipped would be caught.
      if (k > 0) REQUIRE_FALSE(bits_equal(guarded, run(s, nullptr)));
    }
  }
  SECTION("more skipped steps than steps clamp to step 1") {
    const GuardState guard{0, 5, 0, 0, 1};
    REQUIRE(bits_equal(run(3, &guard), run(1, nullptr)));
  }
}

TEMPLATE_TEST_CASE("check_finite then adamw_step: a run with non-finite steps equals one without them", "[kernels]",
                   float, double) {
  using T = TestType;
  const int64_t n = 257;
  const AdamWParams<T> base{T(1e-2), T(0.9), T(0.999), T(1e-8), T(0.05), 1};
  std::vector<T> param = random_values<T>(n, 11, -1, 1), m(n, T(0)), v(n, T(0));
  std::vector<T> ref_param = param, ref_m = m, ref_v = v;
  GuardState s{};
  GuardReport r{};
  int64_t applied = 0;
  for (int64_t step = 1; step <= 9; ++step) {
    std::vector<T> grad = random_values<T>(n, 20 + static_cast<uint32_t>(step), -2, 2);
    const bool bad = step == 2 || step == 5 || step == 6;
    if (bad) grad[static_cast<size_t>(step * 31)] = step == 5 ? -std::numeric_limits<T>::infinity()
                                                              : std::numeric_limits<T>::quiet_NaN();
    GuardTensors<T> list{};
    list.count = 1;
    list.data[0] = grad.data();
    list.numel[0] = n;
    cpu::check_finite<T>(list, step, false, &s, &r);
    AdamWParams<T> p = base;
    p.step = step;
    cpu::adamw_step<T>(param.data(), grad.data(), m.data(), v.data(), n, p, &s);
    if (!bad) {
      p.step = ++applied;
      cpu::adamw_step<T>(ref_param.data(), grad.data(), ref_m.data(), ref_v.data(), n, p);
    }
  }
  REQUIRE(r.count == 3);
  REQUIRE(r.first_step == 2);
  REQUIRE(r.last_step == 6);
  REQUIRE(bits_equal(param, ref_param));
  REQUIRE(bits_equal(m, ref_m));
  REQUIRE(bits_equal(v, ref_v));
}
