// Registry rows of the Vision Transformer's token moves (kernels/tokens.h): pure data movement plus one
// subtract-and-multiply, so the twins agree bit for bit.
#include <algorithm>
#include <cmath>

#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

// Images of 2 channels cut into 3x3 patches: about n elements in (B, 2, 3k, 3k) with k >= 1.
OpCase make_patchify(int64_t n, DType dtype) {
  const int64_t side = 3 * std::max<int64_t>(1, static_cast<int64_t>(std::sqrt(static_cast<double>(n) / 8) / 3));
  const int64_t batch = std::max<int64_t>(1, n / (2 * side * side));
  OpCase c = case_for({batch, 2, side, side});
  c.inputs = {grid_values({batch, 2, side, side}, 81, dtype, 0, 1)};
  c.run = [](Device, Args& a) { return Outputs{ops::patchify(a[0], 3, 0.25, 0.5)}; };
  return c;
}

// Sequences of 33 features; `per_sequence` tokens (B, 33) or one shared token (33).
template <bool kPerSequence>
OpCase make_prepend_token(int64_t n, DType dtype) {
  const Matrix m = matrix(n, 33 * 5);
  OpCase c = case_for({m.rows, 5, 33});
  c.inputs = {grid_values({m.rows, 5, 33}, 82, dtype),
              kPerSequence ? grid_values({m.rows, 33}, 83, dtype) : grid_values({33}, 84, dtype)};
  c.run = [](Device, Args& a) { return Outputs{ops::prepend_token(a[0], a[1])}; };
  return c;
}

}  // namespace

std::vector<OpRow> tokens_rows() {
  const char* fam = "tokens";
  return {
      {"patchify", "ops::patchify", fam, "cpu::patchify", "cuda::patchify", kFloating, make_patchify,
       "patchify: images to normalised 3x3 patch rows"},
      {"prepend_token", "ops::prepend_token", fam, "cpu::prepend_token", "cuda::prepend_token", kFloating,
       make_prepend_token<false>},
      {"prepend_token_rows", "ops::prepend_token", fam, "cpu::prepend_token", "cuda::prepend_token", kFloating,
       make_prepend_token<true>},
  };
}

}  // namespace ember::ops::registry
