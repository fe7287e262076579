// attention and its backward: devices, dtypes, shapes and options (in that order), then one dispatch to the host
// twin or the fused CUDA kernels (kernels/attention.h).
#include "core/ops/attention.h"

#include <cmath>
#include <vector>

#include "core/checks.h"
#include "core/dispatch.h"
#include "kernels/attention.h"

namespace ember::ops {

namespace k = kernels;

namespace {

// Every defined argument on the first one's device.
void check_devices(const char* op, std::initializer_list<NamedTensor> args) {
  const NamedTensor* first = nullptr;
  for (const NamedTensor& a : args) {
    if (!a.tensor.defined()) continue;
    if (first == nullptr) first = &a;
    else check_same_device(op, {*first, a});
  }
}

// The floating arguments share q's dtype; the mask is uint8.
void check_dtypes(const char* op, std::initializer_list<NamedTensor> floating, const Tensor& mask) {
  const NamedTensor& q = *floating.begin();
  check_floating(op, q);
  for (const NamedTensor& a : floating) check_same_dtype(op, {q, a});
  if (mask.defined()) check_dtype(op, {"key_padding_mask", mask}, DType::U8);
}

// q (B, H, Tq, D), k and v (B, H, Tk, D), the mask (B, Tk), causal's Tq == Tk and the CUDA kernels' D limit.
void check_shapes(const char* op, const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor& mask, bool causal) {
  EMBER_CHECK(q.dim() == 4 && q.size(3) > 0, ShapeError, op, "() expects q of shape (B, H, Tq, D) with D > 0, but got ",
              shape_str(q.shape()), "; a (B, T, H, D) tensor needs .transpose(1, 2) first");
  EMBER_CHECK(kt.dim() == 4 && kt.size(0) == q.size(0) && kt.size(1) == q.size(1), ShapeError, op,
              "() expects k of shape (B, H, Tk, D) with q's B = ", q.size(0), " and H = ", q.size(1), ", but got ",
              shape_str(kt.shape()));
  EMBER_CHECK(kt.size(3) == q.size(3), ShapeError, op, "() expects q and k with the same head dim D, but got q ",
              shape_str(q.shape()), " (D = ", q.size(3), ") and k ", shape_str(kt.shape()), " (D = ", kt.size(3),
              ")");
  EMBER_CHECK(v.shape() == kt.shape(), ShapeError, op, "() expects v of k's shape ", shape_str(kt.shape()),
              " (one value row per key), but got ", shape_str(v.shape()));
  EMBER_CHECK(!causal || q.size(2) == kt.size(2), ShapeError, op,
              "() with causal = true needs as many queries as keys, but got Tq = ", q.size(2), " and Tk = ",
              kt.size(2), "; pass causal = false and a key_padding_mask for other patterns");
  const Shape mask_shape{q.size(0), kt.size(2)};
  EMBER_CHECK(!mask.defined() || mask.shape() == mask_shape, ShapeError, op, "() expects key_padding_mask of shape (B, Tk) = ",
              shape_str(mask_shape), " (nonzero = ignore that key), but got ", shape_str(mask.shape()));
  EMBER_CHECK(!q.device().is_cuda() || q.size(3) <= k::cuda::kAttentionMaxHeadDim, ShapeError, op,
              "() on cuda supports a head dim D up to ", k::cuda::kAttentionMaxHeadDim, ", but got D = ", q.size(3),
              "; use more heads of a smaller dim");
}

// The kernels' dims, PyTorch's default scale resolved.
k::AttentionDims dims_of(const char* op, const Tensor& q, const Tensor& kt, const AttentionOptions& o) {
  EMBER_CHECK(o.dropout_p >= 0 && o.dropout_p < 1, ValueError, op, "(): dropout_p must be in [0, 1), got ",
              o.dropout_p, "; pass 0 in eval mode");
  EMBER_CHECK(std::isfinite(o.scale), ValueError, op, "(): scale must be finite (0 picks 1 / sqrt(D)), got ", o.scale);
  const double scale = o.scale != 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return {q.size(0), q.size(1), q.size(2), kt.size(2), q.size(3), scale, o.causal, o.dropout_p, o.seed};
}

const uint8_t* mask_ptr(const Tensor& mask) { return mask.defined() ? mask.data<uint8_t>() : nullptr; }

}  // namespace

AttentionResult attention(const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor& key_padding_mask,
                          const AttentionOptions& options) {
  const char* op = "attention";
  check_defined(op, {"q", q});
  check_defined(op, {"k", kt});
  check_defined(op, {"v", v});
  check_devices(op, {{"q", q}, {"k", kt}, {"v", v}, {"key_padding_mask", key_padding_mask}});
  check_dtypes(op, {{"q", q}, {"k", kt}, {"v", v}}, key_padding_mask);
  check_shapes(op, q, kt, v, key_padding_mask, options.causal);
  const k::AttentionDims d = dims_of(op, q, kt, options);
  AttentionResult r{Tensor::empty(q.shape(), q.dtype(), q.device()),
                    Tensor::empty({d.batch, d.heads, d.q_len}, q.dtype(), q.device())};
  if (q.device().is_meta()) return r;
  const Tensor qc = q.contiguous(), kc = kt.contiguous(), vc = v.contiguous();
  const Tensor mc = key_padding_mask.defined() ? key_padding_mask.contiguous() : Tensor();
  visit_floating(q.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const k::AttentionForwardArgs<T> a{qc.data<T>(),       kc.data<T>(),         vc.data<T>(), mask_ptr(mc),
                                       r.output.data<T>(), r.logsumexp.data<T>(), d};
    if (q.device().is_cpu()) k::cpu::attention_forward<T>(a);
    else EMBER_CUDA_CALL(k::cuda::attention_forward<T>(a, detail::stream_of(q.device())));
  });
  return r;
}

AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& kt, const Tensor& v,
                                  const Tensor& key_padding_mask, const AttentionResult& saved,
                                  const AttentionOptions& options) {
  const char* op = "attention_backward";
  for (NamedTensor t : {NamedTensor{"grad_output", grad_out}, NamedTensor{"q", q}, NamedTensor{"k", kt},
                        NamedTensor{"v", v}, NamedTensor{"output", saved.output},
                        NamedTensor{"logsumexp", saved.logsumexp}})
    check_defined(op, t);
  check_devices(op, {{"q", q}, {"grad_output", grad_out}, {"k", kt}, {"v", v}, {"output", saved.output},
                     {"logsumexp", saved.logsumexp}, {"key_padding_mask", key_padding_mask}});
  check_dtypes(op,
               {{"q", q}, {"grad_output", grad_out}, {"k", kt}, {"v", v}, {"output", saved.output},
                {"logsumexp", saved.logsumexp}},
               key_padding_mask);
  check_shapes(op, q, kt, v, key_padding_mask, options.causal);
  check_same_shape(op, {"grad_output", grad_out}, {"q", q});
  check_same_shape(op, {"output", saved.output}, {"q", q});
  const k::AttentionDims d = dims_of(op, q, kt, options);
  const Shape stats_shape{d.batch, d.heads, d.q_len};
  EMBER_CHECK(saved.logsumexp.shape() == stats_shape, ShapeError, op,
              "() expects the forward's logsumexp of shape (B, H, Tq) = ", shape_str(stats_shape),
              ", but got ", shape_str(saved.logsumexp.shape()));
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype(), q.device()), Tensor::empty(kt.shape(), q.dtype(), q.device()),
                   Tensor::empty(v.shape(), q.dtype(), q.device())};
  if (q.device().is_meta()) return g;
  const Tensor dyc = grad_out.contiguous(), qc = q.contiguous(), kc = kt.contiguous(), vc = v.contiguous();
  const Tensor oc = saved.output.contiguous(), lc = saved.logsumexp.contiguous();
  const Tensor mc = key_padding_mask.defined() ? key_padding_mask.contiguous() : Tensor();
  visit_floating(q.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const k::AttentionBackwardArgs<T> a{dyc.data<T>(), qc.data<T>(),  kc.data<T>(),  vc.data<T>(),
                                        mask_ptr(mc),  oc.data<T>(),  lc.data<T>(),  g.q.data<T>(),
                                        g.k.data<T>(), g.v.data<T>(), d};
    if (q.device().is_cpu()) k::cpu::attention_backward<T>(a);
    else EMBER_CUDA_CALL(k::cuda::attention_backward<T>(a, detail::stream_of(q.device())));
  });
  return g;
}

}  // namespace ember::ops
