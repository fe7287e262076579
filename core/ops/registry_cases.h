// core-internal: what the registry's row files share (deterministic inputs, odd shapes, labels) and their row lists.
#pragma once

#include <string>
#include <vector>

#include "core/ops.h"
#include "core/ops/registry.h"

namespace ember::ops::registry {

using Args = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;

inline const std::vector<DType> kFloating = {DType::F32, DType::F64};
inline const std::vector<DType> kAllDTypes = {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8};

// Uniform values in [low, high) rounded to multiples of 1/64 (of `dtype`, made on the host from `seed`): sums and
// products of a few thousand of them are exact in float, so the twins agree whatever order they add in, and a
// lost or doubled element shows.
Tensor grid_values(const Shape& shape, uint64_t seed, DType dtype, double low = -1, double high = 1);
// Uniform values in [low, high), not rounded (for exp, log, sqrt and division).
Tensor smooth_values(const Shape& shape, uint64_t seed, DType dtype, double low = -1, double high = 1);
// Whole numbers in [low, high] of `dtype` (any dtype).
Tensor whole_values(const Shape& shape, uint64_t seed, DType dtype, double low, double high);
// Labels (r * 7 + 3) % classes for `rows` rows, int64 or int32.
Tensor class_labels(int64_t rows, int64_t classes, DType dtype);
// Labels go with logits: int64 with float32 logits, int32 with float64, so both label types run.
DType label_dtype(DType logits);

// (rows, cols) of a matrix of about `size` elements: `width` columns, or one row of `size` when it is narrower.
struct Matrix {
  int64_t rows, cols;
};
Matrix matrix(int64_t size, int64_t width);
// A square NCHW image side for about `size` elements over `planes` = N * C planes: odd, at least 1.
int64_t odd_side(int64_t size, int64_t planes);

// "n=1K", "n=4099"; "129x257"; "2x3x13x13".
std::string count_label(int64_t n);
std::string shape_label(const Shape& shape);
// A case of `elements` elements labelled by its main operand's shape (1-d: "n=...").
OpCase case_for(const Shape& main_shape);
// f32 or f64's tolerance.
inline double tolerance(DType dtype, double f32, double f64) { return dtype == DType::F64 ? f64 : f32; }

// Selects a GEMM backend for a case's run and restores the previous one when the run ends, however it ends.
class BackendScope {
 public:
  explicit BackendScope(GemmBackend backend) : saved_(gemm_backend()) { set_gemm_backend(backend); }
  ~BackendScope() { set_gemm_backend(saved_); }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  GemmBackend saved_;
};

// The rows of each family (core/ops/registry_<file>.cpp).
std::vector<OpRow> elementwise_rows();
std::vector<OpRow> copy_rows();
std::vector<OpRow> random_rows();
std::vector<OpRow> linear_rows();
std::vector<OpRow> reduce_rows();
std::vector<OpRow> softmax_xent_rows();
std::vector<OpRow> optim_rows();
std::vector<OpRow> guard_rows();
std::vector<OpRow> conv_rows();
std::vector<OpRow> pool_rows();
std::vector<OpRow> batchnorm_rows();
std::vector<OpRow> layernorm_rows();
std::vector<OpRow> gelu_rows();
std::vector<OpRow> bmm_rows();
std::vector<OpRow> embedding_rows();
std::vector<OpRow> heads_rows();
std::vector<OpRow> attention_rows();
std::vector<OpRow> tokens_rows();

}  // namespace ember::ops::registry
