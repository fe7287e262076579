// Host attention, the unfused reference twin. One task per (b, h), each a handful of small dense products over
// task-local buffers, laid out so the inner loops run over contiguous memory and vectorise: K and V transposed to
// (D, Tk) so a score row is sum_c q_ic * K^T[c, :] (an axpy over the keys), softmax with a vectorised float exp,
// P V and the gradients as axpys over D. The dropout factors of the whole slice come from one run of Philox words
// (the slice's indices are consecutive), four words per evaluation. Each score, dP and the sums over the query
// rows (dk, dv) add in the same order as the row-at-a-time loops they replaced; only exp (vecmath's float exp,
// within 1 ulp of libm; double keeps libm) changed the float bits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/philox_words.h"
#include "kernels/cpu/vecmath.h"

namespace ember::kernels::cpu {

#if EMBER_HOST_AVX512 && !defined(EMBER_ISA_AVX512)
namespace avx512 {  // the entry points of this file's AVX-512 build (cpu/attention_avx512.cpp)
template <typename T> void attention_forward(const AttentionForwardArgs<T>& a);
template <typename T> void attention_backward(const AttentionBackwardArgs<T>& a);
}  // namespace avx512
#endif

EMBER_ISA_BEGIN

namespace {

template <typename T> T dot(const T* x, const T* y, int64_t n) {
  T s = 0;
  for (int64_t c = 0; c < n; ++c) s += x[c] * y[c];
  return s;
}

// y += alpha * x; float 4 lanes at a time (the same operations per element, so the same bits as the scalar loop).
template <typename T> void axpy(T* y, T alpha, const T* x, int64_t n) {
  int64_t c = 0;
  if constexpr (sizeof(T) == 4) {
    for (; c + 4 <= n; c += 4) vecmath::store4(y + c, vecmath::load4(y + c) + alpha * vecmath::load4(x + c));
  }
  for (; c < n; ++c) y[c] += alpha * x[c];
}

// out[j] = sum_c x[c] m[c * cols + j] for j in [0, cols), c in [0, rows), each sum in c's order (like dot(x, m^T_j)):
// a row of x times a (rows, cols) matrix with the accumulators in registers, float 8 columns at a time.
template <typename T> void row_times(const T* x, const T* m, int64_t rows, int64_t cols, T* out) {
  int64_t j = 0;
  if constexpr (sizeof(T) == 4) {
    using vecmath::f32x4, vecmath::load4;
    for (; j + 8 <= cols; j += 8) {
      f32x4 a = x[0] * load4(m + j), b = x[0] * load4(m + j + 4);
      for (int64_t c = 1; c < rows; ++c) {
        a += x[c] * load4(m + c * cols + j);
        b += x[c] * load4(m + c * cols + j + 4);
      }
      vecmath::store4(out + j, a);
      vecmath::store4(out + j + 4, b);
    }
    for (; j + 4 <= cols; j += 4) {
      f32x4 a = x[0] * load4(m + j);
      for (int64_t c = 1; c < rows; ++c) a += x[c] * load4(m + c * cols + j);
      vecmath::store4(out + j, a);
    }
  }
  for (; j < cols; ++j) {
    T a = x[0] * m[j];
    for (int64_t c = 1; c < rows; ++c) a += x[c] * m[c * cols + j];
    out[j] = a;
  }
}

// row[j] = exp(row[j] - shift) for j in [0, n): float 4 lanes at a time with vecmath's exp, the tail by its scalar
// form (the same bits); double by libm.
template <typename T> void exp_shifted(T* row, T shift, int64_t n) {
  int64_t j = 0;
  if constexpr (sizeof(T) == 4) {
    for (; j + 4 <= n; j += 4) vecmath::store4(row + j, vecmath::exp(vecmath::load4(row + j) - shift));
  }
  for (; j < n; ++j) row[j] = vecmath::exp(row[j] - shift);
}

// The (b, h) slice's offsets: a row of q/out, of k/v, and of the logsumexp.
struct Slice {
  int64_t b, bh, q_rows, k_rows, stats;
};
Slice slice_of(const AttentionDims& d, int64_t bh) {
  return {bh / d.heads, bh, bh * d.q_len * d.head_dim, bh * d.k_len * d.head_dim, bh * d.q_len};
}

// A task's buffers, reused across its rows.
template <typename T> struct Scratch {
  std::vector<T> kt, vt;    // (D, Tk): K and V transposed
  std::vector<T> scores;    // (Tq, Tk): scale * q k^T, then the weights
  std::vector<T> keep;      // (Tq, Tk): the dropout factors (empty without dropout)
  std::vector<T> dp;         // (Tk): a row of dO V^T
  std::vector<uint32_t> words;

  // Sizes the buffers for d (a thread's buffers grow once and are reused by its later tasks and calls).
  void prepare(const AttentionDims& d) {
    const auto kd = static_cast<size_t>(d.k_len * d.head_dim), qk = static_cast<size_t>(d.q_len * d.k_len);
    kt.resize(kd);
    vt.resize(kd);
    scores.resize(qk);
    dp.resize(static_cast<size_t>(d.k_len));
    keep.resize(d.dropout_p > 0 ? qk : 0);
    words.resize(d.dropout_p > 0 ? qk : 0);
  }
};

// x (rows, cols) -> xt (cols, rows)
template <typename T> void transpose(const T* x, int64_t rows, int64_t cols, T* xt) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c];
}

// scores (Tq, Tk) = scale * q k^T, -inf where masked. Each score sums over c in order, like dot(q_i, k_j, D).
template <typename T>
void scores_of(const AttentionDims& d, const uint8_t* key_padding_mask, const Slice& s, const T* q, Scratch<T>& w) {
  const int64_t D = d.head_dim, Tk = d.k_len;
  const T scale = static_cast<T>(d.scale), minus_inf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < d.q_len; ++i) {
    T* row = w.scores.data() + i * Tk;
    row_times(q + i * D, w.kt.data(), D, Tk, row);
    if (!d.causal && key_padding_mask == nullptr) {
      for (int64_t j = 0; j < Tk; ++j) row[j] *= scale;
      continue;
    }
    for (int64_t j = 0; j < Tk; ++j) row[j] = attention_masked(d, key_padding_mask, s.b, i, j) ? minus_inf : scale * row[j];
  }
}

// The slice's dropout factors (Tq, Tk): one run of Philox words, the slice's indices being consecutive; each
// factor as attention_keep_factor computes it.
template <typename T> void keep_factors(const AttentionDims& d, const Slice& s, Scratch<T>& w) {
  if (d.dropout_p <= 0) return;
  const int64_t n = d.q_len * d.k_len;
  philox_words(d.seed, attention_dropout_index(d, s.bh, 0, 0), n, w.words.data());
  const T p = static_cast<T>(d.dropout_p), kept = T(1) / (T(1) - p);
  for (int64_t e = 0; e < n; ++e) {
    T u;
    if constexpr (sizeof(T) == 4) u = uniform_float(w.words[e]);
    else u = uniform_double(w.words[e]);
    w.keep[e] = u >= p ? kept : T(0);
  }
}

template <typename T> void forward_slice(const AttentionForwardArgs<T>& a, int64_t bh, Scratch<T>& w) {
  const AttentionDims& d = a.dims;
  const int64_t D = d.head_dim, Tk = d.k_len;
  const Slice s = slice_of(d, bh);
  const T* v = a.v + s.k_rows;
  transpose(a.k + s.k_rows, Tk, D, w.kt.data());
  scores_of(d, a.key_padding_mask, s, a.q + s.q_rows, w);
  keep_factors(d, s, w);
  const T minus_inf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < d.q_len; ++i) {
    T* row = w.scores.data() + i * Tk;
    T* out = a.out + s.q_rows + i * D;
    T row_max = minus_inf;
    for (int64_t j = 0; j < Tk; ++j) row_max = std::max(row_max, row[j]);
    for (int64_t c = 0; c < D; ++c) out[c] = T(0);
    if (row_max == minus_inf) {  // no key to attend to: zeros, and a logsumexp that backward reads as "no weights"
      a.logsumexp[s.stats + i] = minus_inf;
      continue;
    }
    exp_shifted(row, row_max, Tk);  // exp(-inf) = 0 for the masked keys
    T sum = 0;
    for (int64_t j = 0; j < Tk; ++j) sum += row[j];
    const T inv_sum = T(1) / sum;
    const T* keep = w.keep.empty() ? nullptr : w.keep.data() + i * Tk;
    for (int64_t j = 0; j < Tk; ++j) {
      if (row[j] == T(0)) continue;
      const T weight = row[j] * inv_sum * (keep ? keep[j] : T(1));
      if (weight != T(0)) axpy(out, weight, v + j * D, D);
    }
    a.logsumexp[s.stats + i] = row_max + std::log(sum);
  }
}

// dS_ij = P_ij (dP_ij - Delta_i) scale, Delta_i = dO_i . O_i, dP_ij = (dO_i . v_j) times the keep factor; dq row i
// = sum_j dS_ij k_j, and dk_j, dv_j sum over the query rows in order.
template <typename T> void backward_slice(const AttentionBackwardArgs<T>& a, int64_t bh, Scratch<T>& w) {
  const AttentionDims& d = a.dims;
  const int64_t D = d.head_dim, Tk = d.k_len;
  const Slice s = slice_of(d, bh);
  const T* k = a.k + s.k_rows;
  T* dk = a.dk + s.k_rows;
  T* dv = a.dv + s.k_rows;
  // The task owns its slice's dk and dv rows and adds the query rows in order: the same bits at any thread count.
  for (int64_t e = 0; e < Tk * D; ++e) dk[e] = dv[e] = T(0);
  transpose(k, Tk, D, w.kt.data());
  transpose(a.v + s.k_rows, Tk, D, w.vt.data());
  scores_of(d, a.key_padding_mask, s, a.q + s.q_rows, w);
  keep_factors(d, s, w);
  const T scale = static_cast<T>(d.scale);
  T* dp = w.dp.data();
  for (int64_t i = 0; i < d.q_len; ++i) {
    const T* q = a.q + s.q_rows + i * D;
    const T* dout = a.grad_out + s.q_rows + i * D;
    T* dq = a.dq + s.q_rows + i * D;
    for (int64_t c = 0; c < D; ++c) dq[c] = T(0);
    const T lse = a.logsumexp[s.stats + i];
    if (std::isinf(lse)) continue;  // a fully masked row had no weights: no gradient
    T* p = w.scores.data() + i * Tk;
    exp_shifted(p, lse, Tk);  // the weights; 0 for the masked keys
    // dP row i = dO_i V^T, each entry summed over c in order like dot(dO_i, v_j, D).
    row_times(dout, w.vt.data(), D, Tk, dp);
    const T delta = dot(dout, a.out + s.q_rows + i * D, D);
    const T* keep = w.keep.empty() ? nullptr : w.keep.data() + i * Tk;
    for (int64_t j = 0; j < Tk; ++j) {
      if (attention_masked(d, a.key_padding_mask, s.b, i, j)) continue;
      const T keep_j = keep ? keep[j] : T(1);
      const T ds = p[j] * (dp[j] * keep_j - delta) * scale;
      axpy(dv + j * D, p[j] * keep_j, dout, D);
      axpy(dq, ds, k + j * D, D);
      axpy(dk + j * D, ds, q, D);
    }
  }
}

}  // namespace

template <typename T> void attention_forward(const AttentionForwardArgs<T>& a) {
  EMBER_ISA_DISPATCH(attention_forward<T>(a));
  const AttentionDims& d = a.dims;
  if (d.batch <= 0 || d.heads <= 0 || d.q_len <= 0 || d.head_dim <= 0) return;
  parallel_for(d.batch * d.heads, [&](int64_t bh) {
    thread_local Scratch<T> w;
    w.prepare(d);
    forward_slice(a, bh, w);
  });
}

template <typename T> void attention_backward(const AttentionBackwardArgs<T>& a) {
  EMBER_ISA_DISPATCH(attention_backward<T>(a));
  const AttentionDims& d = a.dims;
  if (d.batch <= 0 || d.heads <= 0 || d.head_dim <= 0) return;
  parallel_for(d.batch * d.heads, [&](int64_t bh) {
    thread_local Scratch<T> w;
    w.prepare(d);
    backward_slice(a, bh, w);
  });
}

template void attention_forward<float>(const AttentionForwardArgs<float>&);
template void attention_forward<double>(const AttentionForwardArgs<double>&);
template void attention_backward<float>(const AttentionBackwardArgs<float>&);
template void attention_backward<double>(const AttentionBackwardArgs<double>&);

EMBER_ISA_END
}  // namespace ember::kernels::cpu
