// Registry rows of the embedding family (kernels/embedding.h): the gather, and the scatter-add backward with one id
// repeated through the batch, where a racing or reordered accumulation would show.
#include <algorithm>

#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

constexpr int64_t kVocabulary = 101;  // odd, not a multiple of any block's rows
constexpr int64_t kDim = 37;          // past one warp's lanes, not a multiple of 32
constexpr int64_t kTokens = 5;        // ids (rows, 5)

// (rows, kTokens) ids: (i * 7 + 3) % V, and with `repeats` every third one is id 3 (a popular token).
Tensor ids_for(int64_t rows, DType dtype, bool repeats) {
  std::vector<int64_t> ids(static_cast<size_t>(rows * kTokens));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = repeats && i % 3 == 0 ? 3 : static_cast<int64_t>((i * 7 + 3) % kVocabulary);
  return Tensor::from_vector(ids, {rows, kTokens}).to(dtype);
}

int64_t rows_for(int64_t n) { return std::max<int64_t>(1, n / (kTokens * kDim)); }

// A copy: bit for bit.
OpCase make_embedding(int64_t n, DType dtype) {
  const int64_t rows = rows_for(n);
  OpCase c = case_for({rows, kTokens, kDim});
  c.inputs = {grid_values({kVocabulary, kDim}, 81, dtype), ids_for(rows, label_dtype(dtype), false)};
  c.run = [](Device, Args& a) { return Outputs{ops::embedding(a[0], a[1])}; };
  return c;
}

// grad_weight starts non-zero (backward adds). Grid values: every row's sum is exact, and both twins add in the
// order of the ids anyway: bit for bit.
OpCase make_embedding_backward(int64_t n, DType dtype) {
  const int64_t rows = rows_for(n);
  OpCase c = case_for({rows, kTokens, kDim});
  c.inputs = {grid_values({kVocabulary, kDim}, 82, dtype), grid_values({rows, kTokens, kDim}, 83, dtype),
              ids_for(rows, label_dtype(dtype), true)};
  c.run = [](Device, Args& a) {
    ops::embedding_backward_(a[0], a[1], a[2]);
    return Outputs{a[0]};
  };
  return c;
}

}  // namespace

std::vector<OpRow> embedding_rows() {
  const char* fam = "embedding";
  return {
      {"embedding", "ops::embedding", fam, "cpu::embedding_forward", "cuda::embedding_forward", kFloating,
       make_embedding, "embedding: gather of 37-wide rows from a 101-row table"},
      {"embedding_backward", "ops::embedding_backward_", fam, "cpu::embedding_backward", "cuda::embedding_backward",
       kFloating, make_embedding_backward, "embedding_backward: scatter-add, a third of the ids the same"},
  };
}

}  // namespace ember::ops::registry
