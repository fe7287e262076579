// Host twins of the token layout moves: one pass over the output in kElementwiseGrain chunks of the host pool.
#include "kernels/tokens.h"

#include "kernels/cpu/parallel.h"

namespace ember::kernels::cpu {

template <typename T> void patchify(const T* x, T* out, const PatchifyArgs& a) {
  const int64_t n = a.batch * a.channels * (a.height / a.patch) * (a.width / a.patch) * a.patch * a.patch;
  const T mean = static_cast<T>(a.mean), inv_std = static_cast<T>(1.0 / a.std);
  parallel_chunks(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = (x[tokens_math::patch_source(i, a)] - mean) * inv_std;
  });
}

template <typename T> void prepend_token(const T* x, const T* token, T* out, const PrependTokenArgs& a) {
  const int64_t n = a.batch * (a.tokens + 1) * a.dim;
  parallel_chunks(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = tokens_math::prepended(i, x, token, a);
  });
}

template void patchify<float>(const float*, float*, const PatchifyArgs&);
template void patchify<double>(const double*, double*, const PatchifyArgs&);
template void prepend_token<float>(const float*, const float*, float*, const PrependTokenArgs&);
template void prepend_token<double>(const double*, const double*, double*, const PrependTokenArgs&);

}  // namespace ember::kernels::cpu
