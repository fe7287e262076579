// patchify and prepend_token: devices, dtypes, shapes, then one dispatch to the host or CUDA kernels.
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/ops/tokens.h"
#include "kernels/tokens.h"

namespace ember::ops {

namespace k = kernels;

Tensor patchify(const Tensor& images, int64_t patch, double mean, double std) {
  const char* op = "patchify";
  check_defined(op, {"images", images});
  check_floating(op, {"images", images});
  check_dim(op, {"images", images}, 4);
  const int64_t b = images.size(0), c = images.size(1), h = images.size(2), w = images.size(3);
  EMBER_CHECK(patch > 0 && h % patch == 0 && w % patch == 0, ShapeError, op, "(): patch size ", patch,
              " does not divide the ", h, "x", w, " image; choose a patch size that divides both sides");
  EMBER_CHECK(std > 0, ValueError, op, "(): std must be > 0, got ", std);
  Tensor out = Tensor::empty({b, (h / patch) * (w / patch), c * patch * patch}, images.dtype(), images.device());
  if (images.device().is_meta()) return out;
  const Tensor x = images.contiguous();
  const k::PatchifyArgs a{b, c, h, w, patch, mean, std};
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cpu()) k::cpu::patchify<T>(x.data<T>(), out.data<T>(), a);
    else EMBER_CUDA_CALL(k::cuda::patchify<T>(x.data<T>(), out.data<T>(), a, detail::stream_of(x.device())));
  });
  return out;
}

Tensor prepend_token(const Tensor& x, const Tensor& token) {
  const char* op = "prepend_token";
  check_defined(op, {"input", x});
  check_defined(op, {"token", token});
  check_same_device(op, {{"input", x}, {"token", token}});
  check_floating(op, {"input", x});
  check_same_dtype(op, {{"input", x}, {"token", token}});
  check_dim(op, {"input", x}, 3);
  const int64_t b = x.size(0), n = x.size(1), e = x.size(2);
  const bool shared = token.shape() == Shape{e}, per_sequence = token.shape() == Shape{b, e};
  EMBER_CHECK(shared || per_sequence, ShapeError, op, "() expects a token of shape [", e, "] or [", b,
              ", ", e, "] for input ", shape_str(x.shape()), ", but got ", shape_str(token.shape()));
  Tensor out = Tensor::empty({b, n + 1, e}, x.dtype(), x.device());
  if (x.device().is_meta()) return out;
  const Tensor xc = x.contiguous(), tc = token.contiguous();
  const k::PrependTokenArgs a{b, n, e, shared ? 0 : e};
  visit_floating(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cpu()) k::cpu::prepend_token<T>(xc.data<T>(), tc.data<T>(), out.data<T>(), a);
    else
      EMBER_CUDA_CALL(k::cuda::prepend_token<T>(xc.data<T>(), tc.data<T>(), out.data<T>(), a,
                                                detail::stream_of(x.device())));
  });
  return out;
}

}  // namespace ember::ops
