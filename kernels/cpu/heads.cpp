// Host split and merge of attention heads: rows (b, t) of the strided side cut into chunks of the host pool, each
// row's parts * H runs of D elements copied to or from their (p, b, h, t) rows of the contiguous side.
#include "kernels/heads.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace ember::kernels::cpu {

namespace {

// Calls copy(strided_run, contiguous_run) for the parts * H runs of D elements of every row (b, t).
template <typename Copy> void for_each_run(const HeadsLayout& l, Copy&& copy) {
  const int64_t runs = l.parts * l.heads, D = l.head_dim, rows = l.batch * l.tokens;
  if (rows <= 0 || runs <= 0 || D <= 0) return;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (runs * D));
  parallel_chunks(rows, grain, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const int64_t b = r / l.tokens, t = r % l.tokens;
      const int64_t strided = b * l.batch_stride + t * l.token_stride;
      for (int64_t p = 0; p < l.parts; ++p)
        for (int64_t h = 0; h < l.heads; ++h) {
          const int64_t contiguous = (((p * l.batch + b) * l.heads + h) * l.tokens + t) * D;
          copy(strided + (p * l.heads + h) * D, contiguous);
        }
    }
  });
}

}  // namespace

template <typename T> void split_heads(const T* x, T* out, const HeadsLayout& layout) {
  for_each_run(layout, [&](int64_t strided, int64_t contiguous) {
    std::copy(x + strided, x + strided + layout.head_dim, out + contiguous);
  });
}

template <typename T> void merge_heads(const T* x, T* out, const HeadsLayout& layout) {
  for_each_run(layout, [&](int64_t strided, int64_t contiguous) {
    std::copy(x + contiguous, x + contiguous + layout.head_dim, out + strided);
  });
}

template void split_heads<float>(const float*, float*, const HeadsLayout&);
template void split_heads<double>(const double*, double*, const HeadsLayout&);
template void merge_heads<float>(const float*, float*, const HeadsLayout&);
template void merge_heads<double>(const double*, double*, const HeadsLayout&);

}  // namespace ember::kernels::cpu
