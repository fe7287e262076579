// Host attention, the unfused reference twin: per query row the scores, a max-subtracted softmax, dropout and the
// weighted sum of v; the backward recomputes each weight from the saved logsumexp. One task per (b, h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/parallel.h"

namespace ember::kernels::cpu {

namespace {

template <typename T> T dot(const T* x, const T* y, int64_t n) {
  T s = 0;
  for (int64_t c = 0; c < n; ++c) s += x[c] * y[c];
  return s;
}

// y += alpha * x
template <typename T> void axpy(T* y, T alpha, const T* x, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] += alpha * x[c];
}

// The (b, h) slice's offsets: a row of q/out, of k/v, and of the logsumexp.
struct Slice {
  int64_t b, bh, q_rows, k_rows, stats;
};
Slice slice_of(const AttentionDims& d, int64_t bh) {
  return {bh / d.heads, bh, bh * d.q_len * d.head_dim, bh * d.k_len * d.head_dim, bh * d.q_len};
}

// Query row i: scores into `weights` (-inf where masked), then exp(s - max) normalised, dropped and summed over v.
template <typename T>
void forward_row(const AttentionForwardArgs<T>& a, const Slice& s, int64_t i, std::vector<T>& weights) {
  const AttentionDims& d = a.dims;
  const int64_t D = d.head_dim;
  const T* q = a.q + s.q_rows + i * D;
  const T* k = a.k + s.k_rows;
  const T* v = a.v + s.k_rows;
  T* out = a.out + s.q_rows + i * D;
  const T scale = static_cast<T>(d.scale), minus_inf = -std::numeric_limits<T>::infinity();
  T row_max = minus_inf;
  for (int64_t j = 0; j < d.k_len; ++j) {
    weights[j] = attention_masked(d, a.key_padding_mask, s.b, i, j) ? minus_inf : scale * dot(q, k + j * D, D);
    row_max = std::max(row_max, weights[j]);
  }
  for (int64_t c = 0; c < D; ++c) out[c] = T(0);
  if (row_max == minus_inf) {  // no key to attend to: zeros, and a logsumexp that backward reads as "no weights"
    a.logsumexp[s.stats + i] = minus_inf;
    return;
  }
  T sum = 0;
  for (int64_t j = 0; j < d.k_len; ++j) {
    weights[j] = std::exp(weights[j] - row_max);  // exp(-inf) = 0 for the masked keys
    sum += weights[j];
  }
  const T inv_sum = T(1) / sum;
  for (int64_t j = 0; j < d.k_len; ++j) {
    if (weights[j] == T(0)) continue;
    const T w = weights[j] * inv_sum * attention_keep_factor<T>(d, s.bh, i, j);
    if (w != T(0)) axpy(out, w, v + j * D, D);
  }
  a.logsumexp[s.stats + i] = row_max + std::log(sum);
}

// Query row i's share of every gradient: dS_ij = P_ij (dP_ij - Delta_i), Delta_i = dO_i . O_i, dP_ij = (dO_i . v_j)
// times the keep factor. Adds to the slice's dk and dv rows, writes dq row i.
template <typename T> void backward_row(const AttentionBackwardArgs<T>& a, const Slice& s, int64_t i) {
  const AttentionDims& d = a.dims;
  const int64_t D = d.head_dim;
  const T* q = a.q + s.q_rows + i * D;
  const T* dout = a.grad_out + s.q_rows + i * D;
  const T* k = a.k + s.k_rows;
  const T* v = a.v + s.k_rows;
  T* dq = a.dq + s.q_rows + i * D;
  T* dk = a.dk + s.k_rows;
  T* dv = a.dv + s.k_rows;
  for (int64_t c = 0; c < D; ++c) dq[c] = T(0);
  const T lse = a.logsumexp[s.stats + i];
  if (std::isinf(lse)) return;  // a fully masked row had no weights: no gradient
  const T scale = static_cast<T>(d.scale);
  const T delta = dot(dout, a.out + s.q_rows + i * D, D);
  for (int64_t j = 0; j < d.k_len; ++j) {
    if (attention_masked(d, a.key_padding_mask, s.b, i, j)) continue;
    const T p = std::exp(scale * dot(q, k + j * D, D) - lse);
    const T keep = attention_keep_factor<T>(d, s.bh, i, j);
    const T dp = dot(dout, v + j * D, D) * keep;
    const T ds = p * (dp - delta) * scale;
    axpy(dv + j * D, p * keep, dout, D);
    axpy(dq, ds, k + j * D, D);
    axpy(dk + j * D, ds, q, D);
  }
}

}  // namespace

template <typename T> void attention_forward(const AttentionForwardArgs<T>& a) {
  const AttentionDims& d = a.dims;
  if (d.batch <= 0 || d.heads <= 0 || d.q_len <= 0 || d.head_dim <= 0) return;
  parallel_for(d.batch * d.heads, [&](int64_t bh) {
    const Slice s = slice_of(d, bh);
    std::vector<T> weights(static_cast<size_t>(d.k_len));
    for (int64_t i = 0; i < d.q_len; ++i) forward_row(a, s, i, weights);
  });
}

template <typename T> void attention_backward(const AttentionBackwardArgs<T>& a) {
  const AttentionDims& d = a.dims;
  if (d.batch <= 0 || d.heads <= 0 || d.head_dim <= 0) return;
  parallel_for(d.batch * d.heads, [&](int64_t bh) {
    const Slice s = slice_of(d, bh);
    // The task owns its slice's dk and dv rows and adds the query rows in order: the same bits at any thread count.
    for (int64_t e = 0; e < d.k_len * d.head_dim; ++e) a.dk[s.k_rows + e] = a.dv[s.k_rows + e] = T(0);
    for (int64_t i = 0; i < d.q_len; ++i) backward_row(a, s, i);
  });
}

template void attention_forward<float>(const AttentionForwardArgs<float>&);
template void attention_forward<double>(const AttentionForwardArgs<double>&);
template void attention_backward<float>(const AttentionBackwardArgs<float>&);
template void attention_backward<double>(const AttentionBackwardArgs<double>&);

}  // namespace ember::kernels::cpu
