// The fused CUDA attention against its CPU twin, forward and backward (NaN-prefilled outputs): T not a multiple of
// the key tile, Tq != Tk, D = 1, 7, 16, 32, 100, causal, a padding mask with a fully masked row, dropout; scores
// large enough to overflow a softmax that does not subtract the max; the same bits run to run; a float64 gradient
// check on the device. Small shapes: the emulated device runs every thread as a fiber.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "support/data.h"
#include "support/device_array.h"
#include "support/gradcheck.h"

namespace kc = ember::kernels::cpu;
namespace kg = ember::kernels::cuda;

using ember::kernels::AttentionDims;
using ember::test::DeviceArray;
using ember::test::nans;
using ember::test::random_values;

namespace {

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal, masked;
  double dropout_p;
  double magnitude = 2;  // q and k uniform in [-magnitude, magnitude]
};

AttentionDims dims_of(const Case& c) {
  return {c.B, c.H, c.Tq, c.Tk, c.D, 1.0 / std::sqrt(static_cast<double>(c.D)), c.causal, c.dropout_p, 99};
}

// Every third key from 2 on is padded; batch 1's key 0 too, so with causal its query row 0 has no key.
std::vector<uint8_t> padding_mask(const Case& c) {
  std::vector<uint8_t> m(static_cast<size_t>(c.B * c.Tk));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.Tk; ++j) m[b * c.Tk + j] = (j % 3 == 2 || (b == 1 && j == 0)) ? 1 : 0;
  return m;
}

template <typename T> struct Inputs {
  std::vector<T> q, k, v, dout;
  std::vector<uint8_t> mask;
};

template <typename T> Inputs<T> inputs(const Case& c) {
  return {random_values<T>(c.B * c.H * c.Tq * c.D, 51, -c.magnitude, c.magnitude),
          random_values<T>(c.B * c.H * c.Tk * c.D, 52, -c.magnitude, c.magnitude),
          random_values<T>(c.B * c.H * c.Tk * c.D, 53, -1, 1), random_values<T>(c.B * c.H * c.Tq * c.D, 54, -1, 1),
          padding_mask(c)};
}

template <typename T> struct Run {
  std::vector<T> out, logsumexp, dq, dk, dv;
};

// Forward then backward on the CPU twin (device = false) or the CUDA kernels, from the same inputs.
template <typename T> Run<T> run(const Inputs<T>& in, const Case& c, bool device) {
  const AttentionDims d = dims_of(c);
  Run<T> r{nans<T>(in.q.size()), nans<T>(c.B * c.H * c.Tq), nans<T>(in.q.size()), nans<T>(in.k.size()),
           nans<T>(in.v.size())};
  if (!device) {
    const uint8_t* mask = c.masked ? in.mask.data() : nullptr;
    kc::attention_forward<T>({in.q.data(), in.k.data(), in.v.data(), mask, r.out.data(), r.logsumexp.data(), d});
    kc::attention_backward<T>({in.dout.data(), in.q.data(), in.k.data(), in.v.data(), mask, r.out.data(),
                               r.logsumexp.data(), r.dq.data(), r.dk.data(), r.dv.data(), d});
    return r;
  }
  DeviceArray<T> q(in.q), k(in.k), v(in.v), dout(in.dout), out(r.out), lse(r.logsumexp), dq(r.dq), dk(r.dk), dv(r.dv);
  DeviceArray<uint8_t> mask(in.mask);
  const uint8_t* mask_ptr = c.masked ? mask.ptr : nullptr;
  kg::attention_forward<T>({q.ptr, k.ptr, v.ptr, mask_ptr, out.ptr, lse.ptr, d}, nullptr);
  kg::attention_backward<T>({dout.ptr, q.ptr, k.ptr, v.ptr, mask_ptr, out.ptr, lse.ptr, dq.ptr, dk.ptr, dv.ptr, d},
                            nullptr);
  return {out.host(), lse.host(), dq.host(), dk.host(), dv.host()};
}

template <typename T> void check_twins(const Case& c, ember::test::Tolerance tol) {
  INFO("B " << c.B << " H " << c.H << " Tq " << c.Tq << " Tk " << c.Tk << " D " << c.D << " causal " << c.causal
            << " masked " << c.masked << " dropout " << c.dropout_p << " magnitude " << c.magnitude);
  const Inputs<T> in = inputs<T>(c);
  const Run<T> want = run(in, c, false), got = run(in, c, true);
  REQUIRE_CLOSE(got.out, want.out, tol);
  REQUIRE_CLOSE(got.logsumexp, want.logsumexp, tol);
  REQUIRE_CLOSE(got.dq, want.dq, tol);
  REQUIRE_CLOSE(got.dk, want.dk, tol);
  REQUIRE_CLOSE(got.dv, want.dv, tol);
}

// Tiles of 32 keys (16 in float64) and blocks of 4 query rows: T of 1, 17, 33, 40, 65 end both mid-tile.
const std::vector<Case> kCases = {
    {1, 1, 1, 1, 1, false, false, 0},     {2, 2, 17, 17, 16, true, false, 0},  {1, 3, 33, 40, 32, false, true, 0},
    {2, 1, 19, 23, 7, false, true, 0.2},  {2, 2, 65, 65, 16, true, true, 0.1}, {1, 1, 9, 70, 100, false, true, 0},
    {2, 1, 6, 37, 64, false, false, 0.5}, {1, 1, 3, 5, 128, true, false, 0},
};

}  // namespace

TEMPLATE_TEST_CASE("CUDA attention forward and backward equal the CPU twin", "[cuda][attention]", float, double) {
  for (const Case& c : kCases) check_twins<TestType>(c, ember::test::reduce_tolerance<TestType>());
}

TEMPLATE_TEST_CASE("CUDA attention keeps scores of magnitude 1e3 finite (online softmax subtracts the max)",
                   "[cuda][attention]", float, double) {
  // Scores up to about 40^2 * sqrt(D): exp of them overflows float64 and float alike; the float tolerance is wider
  // because an absolute error of a few ulps of 1e3 in a score moves its weight by about 1e-4.
  const ember::test::Tolerance tol = sizeof(TestType) == 4 ? ember::test::Tolerance{1e-4, 1e-3} : ember::test::kF64;
  check_twins<TestType>({1, 2, 37, 37, 16, true, true, 0, 40}, tol);
  check_twins<TestType>({2, 1, 5, 70, 32, false, true, 0.25, 40}, tol);
}

TEST_CASE("CUDA attention is the same bits run to run", "[cuda][attention]") {
  const Case c{2, 2, 45, 45, 24, true, true, 0.1};
  const Inputs<float> in = inputs<float>(c);
  const Run<float> first = run(in, c, true);
  const Run<float> again = run(in, c, true);
  CHECK(again.out == first.out);
  CHECK(again.dq == first.dq);
  CHECK(again.dk == first.dk);
  CHECK(again.dv == first.dv);
}

TEST_CASE("CUDA attention passes the float64 gradient check on the device", "[cuda][attention]") {
  const Case c{2, 1, 5, 5, 3, true, true, 0.25};
  const Inputs<double> in = inputs<double>(c);
  const Run<double> r = run(in, c, true);
  DeviceArray<uint8_t> mask(in.mask);
  // f = sum(attention(q, k, v) * dout), on the device.
  auto f = [&](const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v) {
    DeviceArray<double> qd(q), kd(k), vd(v), out(nans<double>(q.size())), lse(nans<double>(c.B * c.H * c.Tq));
    kg::attention_forward<double>({qd.ptr, kd.ptr, vd.ptr, mask.ptr, out.ptr, lse.ptr, dims_of(c)}, nullptr);
    const std::vector<double> y = out.host();
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * in.dout[i];
    return s;
  };
  REQUIRE_GRADCHECK(([&](const std::vector<double>& x) { return f(x, in.k, in.v); }), in.q, r.dq);
  REQUIRE_GRADCHECK(([&](const std::vector<double>& x) { return f(in.q, x, in.v); }), in.k, r.dk);
  REQUIRE_GRADCHECK(([&](const std::vector<double>& x) { return f(in.q, in.k, x); }), in.v, r.dv);
}
