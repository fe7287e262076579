// Host attention against the float64 definition (odd T, Tq != Tk, D = 1/16/32, causal, padding mask, dropout),
// float64 gradient checks of q, k and v, a fully masked row (zeros and -inf, never NaN), the same bits at 1 and 2
// threads, and the op's checks in order: device, dtype, shape, options.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "core/ops.h"
#include "kernels/attention.h"
#include "support/data.h"
#include "support/gradcheck.h"
#include "support/threads.h"

using namespace ember;
using kernels::AttentionDims;

namespace {

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal, masked;
  double dropout_p;
};

AttentionDims dims_of(const Case& c) {
  return {c.B, c.H, c.Tq, c.Tk, c.D, 1.0 / std::sqrt(static_cast<double>(c.D)), c.causal, c.dropout_p, 1234};
}

// Batch b ignores keys j with (j + b) % 4 == 1, and batch 1 its key 0 as well (with causal, its query row 0 then
// has no key left).
std::vector<uint8_t> padding_mask(const Case& c) {
  std::vector<uint8_t> m(static_cast<size_t>(c.B * c.Tk));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.Tk; ++j) m[b * c.Tk + j] = ((j + b) % 4 == 1 || (b == 1 && j == 0)) ? 1 : 0;
  return m;
}

template <typename T> struct Inputs {
  std::vector<T> q, k, v, dout;
  std::vector<uint8_t> mask;
};

template <typename T> Inputs<T> inputs(const Case& c, unsigned seed) {
  return {test::random_values<T>(c.B * c.H * c.Tq * c.D, seed, -2, 2),
          test::random_values<T>(c.B * c.H * c.Tk * c.D, seed + 1, -2, 2),
          test::random_values<T>(c.B * c.H * c.Tk * c.D, seed + 2, -1, 1),
          test::random_values<T>(c.B * c.H * c.Tq * c.D, seed + 3, -1, 1), padding_mask(c)};
}

struct Reference {
  std::vector<double> out, logsumexp;
};

// The definition straight from the header's words, in float64: the whole score matrix of each (b, h), masked to
// -inf, softmax, weights dropped where uniform(philox_word(seed, index)) < p and the rest scaled by 1 / (1 - p).
template <typename T> Reference attention_reference(const Inputs<T>& in, const Case& c) {
  const AttentionDims d = dims_of(c);
  Reference r{std::vector<double>(in.q.size(), 0.0), {}};
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t bh = 0; bh < c.B * c.H; ++bh)
    for (int64_t i = 0; i < c.Tq; ++i) {
      std::vector<double> s(static_cast<size_t>(c.Tk), -inf);
      for (int64_t j = 0; j < c.Tk; ++j) {
        if ((c.causal && j > i) || (c.masked && in.mask[(bh / c.H) * c.Tk + j])) continue;
        double dot = 0;
        for (int64_t e = 0; e < c.D; ++e)
          dot += double(in.q[(bh * c.Tq + i) * c.D + e]) * double(in.k[(bh * c.Tk + j) * c.D + e]);
        s[j] = d.scale * dot;
      }
      double m = -inf, sum = 0;
      for (double x : s) m = std::max(m, x);
      for (double x : s) sum += m == -inf ? 0.0 : std::exp(x - m);
      r.logsumexp.push_back(sum == 0 ? -inf : m + std::log(sum));
      for (int64_t j = 0; j < c.Tk && sum > 0; ++j) {
        const uint32_t bits = kernels::philox_word(d.seed, static_cast<uint64_t>((bh * c.Tq + i) * c.Tk + j));
        const double u = sizeof(T) == 4 ? double(kernels::uniform_float(bits)) : kernels::uniform_double(bits);
        const bool dropped = c.dropout_p > 0 && u < double(static_cast<T>(c.dropout_p));
        const double w = dropped ? 0.0 : std::exp(s[j] - m) / sum / (1 - c.dropout_p);
        for (int64_t e = 0; e < c.D; ++e) r.out[(bh * c.Tq + i) * c.D + e] += w * double(in.v[(bh * c.Tk + j) * c.D + e]);
      }
    }
  return r;
}

template <typename T> struct Run {
  std::vector<T> out, logsumexp, dq, dk, dv;
};

// The host twins forward then backward (dout as the output's gradient), every output NaN-prefilled.
template <typename T> Run<T> run_cpu(const Inputs<T>& in, const Case& c) {
  const AttentionDims d = dims_of(c);
  Run<T> r{test::nans<T>(in.q.size()), test::nans<T>(c.B * c.H * c.Tq), test::nans<T>(in.q.size()),
           test::nans<T>(in.k.size()), test::nans<T>(in.v.size())};
  const uint8_t* mask = c.masked ? in.mask.data() : nullptr;
  kernels::cpu::attention_forward<T>({in.q.data(), in.k.data(), in.v.data(), mask, r.out.data(), r.logsumexp.data(), d});
  kernels::cpu::attention_backward<T>({in.dout.data(), in.q.data(), in.k.data(), in.v.data(), mask, r.out.data(),
                                       r.logsumexp.data(), r.dq.data(), r.dk.data(), r.dv.data(), d});
  return r;
}

const std::vector<Case> kCases = {
    {1, 1, 1, 1, 1, false, false, 0},   {2, 3, 17, 17, 16, false, false, 0}, {2, 3, 17, 17, 16, true, false, 0},
    {2, 2, 5, 9, 7, false, true, 0},    {2, 2, 13, 13, 32, true, true, 0},   {2, 1, 33, 40, 32, false, true, 0.25},
    {2, 2, 9, 9, 5, true, true, 0.5},
};

// f = sum(attention(q, k, v) * R) in float64 as a function of q, k or v; the analytic gradients from the backward.
void gradcheck_attention(const Case& c) {
  INFO("B " << c.B << " H " << c.H << " Tq " << c.Tq << " Tk " << c.Tk << " D " << c.D << " causal " << c.causal
            << " masked " << c.masked << " dropout " << c.dropout_p);
  const Inputs<double> in = inputs<double>(c, 21);
  const Run<double> r = run_cpu(in, c);
  auto f = [&](const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v) {
    std::vector<double> out(q.size()), lse(static_cast<size_t>(c.B * c.H * c.Tq));
    kernels::cpu::attention_forward<double>(
        {q.data(), k.data(), v.data(), c.masked ? in.mask.data() : nullptr, out.data(), lse.data(), dims_of(c)});
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += out[i] * in.dout[i];
    return s;
  };
  REQUIRE_GRADCHECK(([&](const std::vector<double>& x) { return f(x, in.k, in.v); }), in.q, r.dq);
  REQUIRE_GRADCHECK(([&](const std::vector<double>& x) { return f(in.q, x, in.v); }), in.k, r.dk);
  REQUIRE_GRADCHECK(([&](const std::vector<double>& x) { return f(in.q, in.k, x); }), in.v, r.dv);
}

}  // namespace

TEMPLATE_TEST_CASE("cpu attention_forward equals the float64 definition", "[kernels][attention]", float, double) {
  for (const Case& c : kCases) {
    INFO("B " << c.B << " H " << c.H << " Tq " << c.Tq << " Tk " << c.Tk << " D " << c.D << " causal " << c.causal
              << " masked " << c.masked << " dropout " << c.dropout_p);
    const Inputs<TestType> in = inputs<TestType>(c, 5);
    const Run<TestType> got = run_cpu(in, c);
    const Reference want = attention_reference(in, c);
    REQUIRE_CLOSE(got.out, want.out, test::reduce_tolerance<TestType>());
    REQUIRE_CLOSE(got.logsumexp, want.logsumexp, test::reduce_tolerance<TestType>());
  }
}

TEST_CASE("cpu attention_backward passes the float64 gradient check", "[kernels][attention]") {
  gradcheck_attention({1, 1, 1, 1, 1, false, false, 0});
  gradcheck_attention({1, 2, 4, 6, 5, false, false, 0});
  gradcheck_attention({2, 2, 5, 5, 3, true, true, 0});
  gradcheck_attention({2, 1, 4, 7, 4, false, true, 0.3});
  gradcheck_attention({2, 2, 6, 6, 3, true, true, 0.25});
}

TEMPLATE_TEST_CASE("cpu attention gives a fully masked row zeros, -inf and no gradient, never NaN",
                   "[kernels][attention]", float, double) {
  const Case c{2, 2, 5, 5, 4, true, true, 0.2};  // batch 1's key 0 is padded: its query row 0 sees nothing
  const Run<TestType> r = run_cpu(inputs<TestType>(c, 9), c);
  for (int64_t h = 0; h < c.H; ++h) {
    const int64_t row = (1 * c.H + h) * c.Tq;  // (b = 1, h, i = 0)
    CHECK(r.logsumexp[row] == -std::numeric_limits<TestType>::infinity());
    for (int64_t e = 0; e < c.D; ++e) {
      CHECK(r.out[row * c.D + e] == TestType(0));
      CHECK(r.dq[row * c.D + e] == TestType(0));
    }
  }
  for (const auto* v : {&r.out, &r.dq, &r.dk, &r.dv})
    for (TestType x : *v) REQUIRE(std::isfinite(x));
}

TEMPLATE_TEST_CASE("cpu attention is the same bits at 1 and 2 threads", "[kernels][attention]", float, double) {
  const Case c{2, 3, 31, 29, 16, false, true, 0.125};
  const Inputs<TestType> in = inputs<TestType>(c, 13);
  auto all = [&](int threads) {
    test::ThreadsScope scope(threads);
    const Run<TestType> r = run_cpu(in, c);
    std::vector<TestType> v = r.out;
    for (const auto* part : {&r.logsumexp, &r.dq, &r.dk, &r.dv}) v.insert(v.end(), part->begin(), part->end());
    return v;
  };
  const std::vector<TestType> one = all(1);
  CHECK(one == all(2));
  CHECK(one == all(1));
}

TEST_CASE("attention checks device, then dtype, then shape, then options", "[core][attention]") {
  const Tensor q = Tensor::ones({1, 2, 3, 4}), k = Tensor::ones({1, 2, 5, 4}), v = Tensor::ones({1, 2, 5, 4});
  const Tensor meta_k = Tensor::empty({1, 2, 5, 8}, DType::F64, Device::meta());
  // A k wrong in all three ways names the device; wrong in dtype and shape, the dtype.
  CHECK_THROWS_AS(ops::attention(q, meta_k, v, Tensor()), DeviceMismatchError);
  CHECK_THROWS_AS(ops::attention(q, Tensor::ones({1, 2, 5, 8}, DType::F64), v, Tensor()), DTypeError);
  CHECK_THROWS_AS(ops::attention(Tensor::ones({1, 2, 3, 4}, DType::I64), k, v, Tensor()), DTypeError);
  CHECK_THROWS_AS(ops::attention(q, k, v, Tensor::zeros({1, 5})), DTypeError);  // the mask must be uint8
  CHECK_THROWS_WITH(ops::attention(q, Tensor::ones({1, 2, 5, 8}), v, Tensor()),
                    "attention() expects q and k with the same head dim D, but got q [1, 2, 3, 4] (D = 4) and k "
                    "[1, 2, 5, 8] (D = 8)");
  CHECK_THROWS_AS(ops::attention(Tensor::ones({2, 3, 4}), k, v, Tensor()), ShapeError);
  CHECK_THROWS_AS(ops::attention(q, Tensor::ones({1, 3, 5, 4}), v, Tensor()), ShapeError);  // H differs
  CHECK_THROWS_WITH(ops::attention(q, k, Tensor::ones({1, 2, 6, 4}), Tensor()),
                    "attention() expects v of k's shape [1, 2, 5, 4] (one value row per key), but got [1, 2, 6, 4]");
  ops::AttentionOptions causal;
  causal.causal = true;
  CHECK_THROWS_WITH(ops::attention(q, k, v, Tensor(), causal),
                    "attention() with causal = true needs as many queries as keys, but got Tq = 3 and Tk = 5; pass "
                    "causal = false and a key_padding_mask for other patterns");
  CHECK_THROWS_WITH(ops::attention(q, k, v, Tensor::zeros({2, 5}, DType::U8)),
                    "attention() expects key_padding_mask of shape (B, Tk) = [1, 5] (nonzero = ignore that key), "
                    "but got [2, 5]");
  ops::AttentionOptions bad;
  bad.dropout_p = 1;
  CHECK_THROWS_WITH(ops::attention(q, k, v, Tensor(), bad),
                    "attention(): dropout_p must be in [0, 1), got 1; pass 0 in eval mode");
  bad.dropout_p = -0.5;
  CHECK_THROWS_AS(ops::attention(q, k, v, Tensor(), bad), ValueError);
  bad.dropout_p = 0;
  bad.scale = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(ops::attention(q, k, v, Tensor(), bad), ValueError);
}

TEST_CASE("attention_backward checks its saved tensors", "[core][attention]") {
  const Tensor q = Tensor::randn({1, 2, 3, 4}, 1), k = Tensor::randn({1, 2, 5, 4}, 2), v = Tensor::randn({1, 2, 5, 4}, 3);
  const ops::AttentionResult saved = ops::attention(q, k, v, Tensor());
  CHECK_NOTHROW(ops::attention_backward(q, q, k, v, Tensor(), saved));
  CHECK_THROWS_AS(ops::attention_backward(q, q, k, v, Tensor(), {saved.output, Tensor()}), ValueError);
  CHECK_THROWS_AS(ops::attention_backward(q.to(DType::F64), q, k, v, Tensor(), saved), DTypeError);
  CHECK_THROWS_AS(ops::attention_backward(Tensor::ones({1, 2, 3, 5}), q, k, v, Tensor(), saved), ShapeError);
  CHECK_THROWS_WITH(ops::attention_backward(q, q, k, v, Tensor(), {saved.output, Tensor::zeros({1, 2, 4})}),
                    "attention_backward() expects the forward's logsumexp of shape (B, H, Tq) = [1, 2, 3], but got "
                    "[1, 2, 4]");
}

TEST_CASE("attention resolves the default scale, infers shapes on meta and matches the kernel", "[core][attention]") {
  const Tensor q = Tensor::randn({2, 3, 5, 8}, 4, DType::F64), k = Tensor::randn({2, 3, 7, 8}, 5, DType::F64),
               v = Tensor::randn({2, 3, 7, 8}, 6, DType::F64);
  ops::AttentionOptions explicit_scale;
  explicit_scale.scale = 1 / std::sqrt(8.0);
  const ops::AttentionResult r = ops::attention(q, k, v, Tensor());
  CHECK(r.output.shape() == Shape{2, 3, 5, 8});
  CHECK(r.logsumexp.shape() == Shape{2, 3, 5});
  CHECK(r.output.to_vector<double>() == ops::attention(q, k, v, Tensor(), explicit_scale).output.to_vector<double>());
  explicit_scale.scale = 1;
  CHECK(r.output.to_vector<double>() != ops::attention(q, k, v, Tensor(), explicit_scale).output.to_vector<double>());
  const Device meta = Device::meta();
  const ops::AttentionResult m = ops::attention(q.to(meta), k.to(meta), v.to(meta), Tensor::empty({2, 7}, DType::U8, meta));
  CHECK(m.output.shape() == Shape{2, 3, 5, 8});
  CHECK(m.logsumexp.shape() == Shape{2, 3, 5});
  const ops::AttentionGrads g = ops::attention_backward(m.output, q.to(meta), k.to(meta), v.to(meta), Tensor(), m);
  CHECK(g.k.shape() == Shape{2, 3, 7, 8});
}
