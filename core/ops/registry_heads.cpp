// Registry rows of the heads family (kernels/heads.h): a packed q|k|v projection split into (3, B, H, T, D), and the
// merge back. Pure copies: bit for bit.
#include <algorithm>

#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

constexpr int64_t kParts = 3, kBatch = 2, kHeads = 3, kHeadDim = 5;  // odd sizes; features 3 * 3 * 5 = 45
constexpr int64_t kFeatures = kParts * kHeads * kHeadDim;

int64_t tokens_for(int64_t n) { return std::max<int64_t>(1, n / (kBatch * kFeatures)); }

OpCase make_split_heads(int64_t n, DType dtype) {
  const Shape x{kBatch, tokens_for(n), kFeatures};
  OpCase c = case_for(x);
  c.label += " parts 3";
  c.inputs = {grid_values(x, 91, dtype)};
  c.run = [](Device, Args& a) { return Outputs{ops::split_heads(a[0], kHeads, kParts)}; };
  return c;
}

OpCase make_merge_heads(int64_t n, DType dtype) {
  const Shape x{kParts, kBatch, kHeads, tokens_for(n), kHeadDim};
  OpCase c = case_for(x);
  c.inputs = {grid_values(x, 92, dtype)};
  c.run = [](Device, Args& a) { return Outputs{ops::merge_heads(a[0])}; };
  return c;
}

}  // namespace

std::vector<OpRow> heads_rows() {
  const char* fam = "heads";
  return {
      {"split_heads", "ops::split_heads", fam, "cpu::split_heads", "cuda::split_heads", kFloating, make_split_heads,
       "split_heads: (B, T, 3 * 3 * 5) -> (3, B, 3, T, 5)"},
      {"merge_heads", "ops::merge_heads", fam, "cpu::merge_heads", "cuda::merge_heads", kFloating, make_merge_heads,
       "merge_heads: (3, B, 3, T, 5) -> (B, T, 45)"},
  };
}

}  // namespace ember::ops::registry
