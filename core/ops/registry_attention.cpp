// Registry rows of scaled dot-product attention (kernels/attention.h): forward and backward, with a key padding
// mask and dropout, and causal with a query row whose only key is padded (zeros, logsumexp -inf).
#include <algorithm>
#include <vector>

#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

constexpr int64_t kHeads = 2, kHeadDim = 20;  // D not a multiple of 32 nor of 16
constexpr int64_t kMaxQueries = 127;         // past it the case grows in batch: the work stays linear in the size

// Softmax sums in another order and exp from another library: the twins differ by a few ulps of the sums.
double attention_tolerance(DType dtype) { return tolerance(dtype, 2e-5, 1e-12); }

struct Sizes {
  int64_t batch, q_len, k_len;
  Shape q() const { return {batch, kHeads, q_len, kHeadDim}; }
  Shape kv() const { return {batch, kHeads, k_len, kHeadDim}; }
};
// About `size` elements of q, batch >= 2, odd Tq; Tk = Tq + 3 unless causal, so the key tiles end elsewhere.
Sizes sizes_for(int64_t size, bool causal) {
  const int64_t q_len = std::clamp<int64_t>(size / (2 * kHeads * kHeadDim), 1, kMaxQueries) | 1;
  const int64_t batch = std::max<int64_t>(2, size / (kHeads * kHeadDim * q_len));
  return {batch, q_len, causal ? q_len : q_len + 3};
}

// Every batch ignores every fifth key; batch 1 also its key 0, so with causal its query row 0 has no key at all.
Tensor padding_mask(const Sizes& s) {
  std::vector<double> m(static_cast<size_t>(s.batch * s.k_len), 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t j = 0; j < s.k_len; ++j) m[static_cast<size_t>(b * s.k_len + j)] = (j % 5 == 3 || (b == 1 && j == 0));
  return Tensor::from_vector(m, {s.batch, s.k_len}).to(DType::U8);
}

AttentionOptions options_for(bool causal) {
  AttentionOptions o;
  o.causal = causal;
  o.dropout_p = 0.125;
  o.seed = 77;
  return o;
}

template <bool kCausal>
OpCase make_attention(int64_t n, DType dtype) {
  const Sizes s = sizes_for(n, kCausal);
  OpCase c = case_for(s.q());
  c.inputs = {smooth_values(s.q(), 81, dtype, -2, 2), smooth_values(s.kv(), 82, dtype, -2, 2),
              smooth_values(s.kv(), 83, dtype), padding_mask(s)};
  c.run = [](Device, Args& a) {
    AttentionResult r = ops::attention(a[0], a[1], a[2], a[3], options_for(kCausal));
    return Outputs{r.output, r.logsumexp};
  };
  c.tolerance = attention_tolerance(dtype);
  return c;
}

// The saved output and logsumexp come from the host forward with the same options.
template <bool kCausal>
OpCase make_attention_backward(int64_t n, DType dtype) {
  const Sizes s = sizes_for(n, kCausal);
  OpCase c = case_for(s.q());
  const Tensor q = smooth_values(s.q(), 84, dtype, -2, 2), k = smooth_values(s.kv(), 85, dtype, -2, 2),
               v = smooth_values(s.kv(), 86, dtype), mask = padding_mask(s);
  const AttentionResult fwd = ops::attention(q, k, v, mask, options_for(kCausal));
  c.inputs = {smooth_values(q.shape(), 87, dtype), q, k, v, mask, fwd.output, fwd.logsumexp};
  c.run = [](Device, Args& a) {
    AttentionGrads g = ops::attention_backward(a[0], a[1], a[2], a[3], a[4], {a[5], a[6]}, options_for(kCausal));
    return Outputs{g.q, g.k, g.v};
  };
  c.tolerance = attention_tolerance(dtype);
  return c;
}

}  // namespace

// No bench title: a case does about 4 * Tk * D flops per element of q, so the op suite's 2^26-element sizes would
// take minutes on the host.
std::vector<OpRow> attention_rows() {
  const char* fam = "attention";
  return {
      {"attention", "ops::attention", fam, "cpu::attention_forward", "cuda::attention_forward", kFloating,
       make_attention<false>},
      {"attention_causal", "ops::attention", fam, "cpu::attention_forward", "cuda::attention_forward", kFloating,
       make_attention<true>},
      {"attention_backward", "ops::attention_backward", fam, "cpu::attention_backward", "cuda::attention_backward",
       kFloating, make_attention_backward<false>},
      {"attention_causal_backward", "ops::attention_backward", fam, "cpu::attention_backward",
       "cuda::attention_backward", kFloating, make_attention_backward<true>},
  };
}

}  // namespace ember::ops::registry
