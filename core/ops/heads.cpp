// split_heads and merge_heads: dtype, then shapes (one input: no device to match), then one dispatch to the host or
// CUDA kernels. split_heads reads a view with a unit feature stride in place (the token and batch strides go to
// the kernel); any other layout is made contiguous first.
#include "core/ops/heads.h"

#include "core/checks.h"
#include "core/dispatch.h"
#include "kernels/heads.h"

namespace ember::ops {

namespace k = kernels;

namespace {

// "embed_dim 64 is not divisible by num_heads 5": what the caller named the width, and how to fix it.
void check_divisible(const Tensor& x, int64_t heads, int64_t parts) {
  const int64_t F = x.size(2);
  if (parts == 1) {
    EMBER_CHECK(F % heads == 0, ShapeError, "split_heads(): embed_dim ", F, " (the last dim of input ",
                shape_str(x.shape()), ") is not divisible by num_heads ", heads,
                "; choose num_heads among the divisors of ", F, ", or change embed_dim");
    return;
  }
  EMBER_CHECK(F % (parts * heads) == 0, ShapeError, "split_heads(): the last dim ", F, " of input ", shape_str(x.shape()),
              " packs ", parts, " projections of embed_dim each, so it must be divisible by parts * num_heads = ", parts,
              " * ", heads, " = ", parts * heads, "; make embed_dim divisible by num_heads");
}

}  // namespace

Tensor split_heads(const Tensor& x, int64_t heads, int64_t parts) {
  const char* op = "split_heads";
  check_defined(op, {"input", x});
  check_floating(op, {"input", x});
  EMBER_CHECK(x.dim() == 3, ShapeError, op, "() expects input of shape (B, T, parts * num_heads * head_dim), but got ",
              shape_str(x.shape()));
  EMBER_CHECK(heads > 0 && parts > 0, ValueError, op, "(): num_heads and parts must be positive, got num_heads ", heads,
              " and parts ", parts);
  check_divisible(x, heads, parts);
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2) / (parts * heads);
  Tensor out = Tensor::empty({parts, B, heads, T, D}, x.dtype(), x.device());
  if (x.device().is_meta()) return out;
  const Tensor xs = x.strides()[2] == 1 ? x : x.contiguous();
  const k::HeadsLayout layout{parts, B, heads, T, D, xs.strides()[0], xs.strides()[1]};
  visit_floating(x.dtype(), op, [&](auto zero) {
    using V = decltype(zero);
    if (x.device().is_cpu()) k::cpu::split_heads<V>(xs.data<V>(), out.data<V>(), layout);
    else EMBER_CUDA_CALL(k::cuda::split_heads<V>(xs.data<V>(), out.data<V>(), layout, detail::stream_of(x.device())));
  });
  return out;
}

Tensor merge_heads(const Tensor& x) {
  const char* op = "merge_heads";
  check_defined(op, {"input", x});
  check_floating(op, {"input", x});
  EMBER_CHECK(x.dim() == 5, ShapeError, op, "() expects input of shape (parts, B, num_heads, T, head_dim), but got ",
              shape_str(x.shape()));
  const int64_t parts = x.size(0), B = x.size(1), heads = x.size(2), T = x.size(3), D = x.size(4);
  const int64_t F = parts * heads * D;
  Tensor out = Tensor::empty({B, T, F}, x.dtype(), x.device());
  if (x.device().is_meta()) return out;
  const Tensor xc = x.contiguous();
  const k::HeadsLayout layout{parts, B, heads, T, D, T * F, F};
  visit_floating(x.dtype(), op, [&](auto zero) {
    using V = decltype(zero);
    if (x.device().is_cpu()) k::cpu::merge_heads<V>(xc.data<V>(), out.data<V>(), layout);
    else EMBER_CUDA_CALL(k::cuda::merge_heads<V>(xc.data<V>(), out.data<V>(), layout, detail::stream_of(x.device())));
  });
  return out;
}

}  // namespace ember::ops
