// Registry rows of the pointwise families: elementwise (kernels/elementwise.h), copy (kernels/copy.h) and random
// (kernels/random.h). Their inputs are multiples of 1/64, so every result is exact and the twins agree bit for bit.
#include <algorithm>

#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

constexpr int64_t kBiasWidth = 257;  // the MLP's widest layer (256) plus one, so a column tail is left over

// a (n) op b (n).
OpCase binary(int64_t n, DType dtype, Tensor (*op)(const Tensor&, const Tensor&)) {
  OpCase c = case_for({n});
  c.inputs = {grid_values({n}, 1, dtype), grid_values({n}, 2, dtype)};
  c.run = [op](Device, Args& a) { return Outputs{op(a[0], a[1])}; };
  return c;
}

OpCase unary(int64_t n, DType dtype, Tensor (*op)(const Tensor&)) {
  OpCase c = case_for({n});
  c.inputs = {grid_values({n}, 3, dtype)};
  c.run = [op](Device, Args& a) { return Outputs{op(a[0])}; };
  return c;
}

OpCase make_add_(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.inputs = {grid_values({n}, 4, dtype), grid_values({n}, 5, dtype)};
  c.run = [](Device, Args& a) {
    ops::add_(a[0], a[1], 0.75);
    return Outputs{a[0]};
  };
  c.bytes = 3.0 * static_cast<double>(c.inputs[0].nbytes());  // read self and other, write self
  return c;
}

OpCase make_fill_(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.inputs = {Tensor::zeros({n}, dtype)};
  c.run = [](Device, Args& a) {
    ops::fill_(a[0], 3);
    return Outputs{a[0]};
  };
  c.bytes = static_cast<double>(c.inputs[0].nbytes());  // written only
  return c;
}

OpCase make_add_bias(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kBiasWidth);
  OpCase c = case_for({m.rows, m.cols});
  c.inputs = {grid_values({m.rows, m.cols}, 6, dtype), grid_values({m.cols}, 7, dtype)};
  c.run = [](Device, Args& a) { return Outputs{ops::add_bias(a[0], a[1])}; };
  return c;
}

// Casts from the row's dtype: u8 -> f32 scaled (images), i32 -> i64 (labels), and the floating ones across.
struct CastPlan {
  DType to;
  double scale;
};
CastPlan cast_plan(DType from) {
  switch (from) {
    case DType::U8: return {DType::F32, 1.0 / 255};
    case DType::I32: return {DType::I64, 1};
    case DType::I64: return {DType::F32, 0.5};
    case DType::F32: return {DType::F64, 1};
    case DType::F64: return {DType::F32, 0.25};
  }
  return {DType::F32, 1};
}

Tensor cast_source(const Shape& shape, DType from) {
  if (from == DType::U8) return whole_values(shape, 8, from, 0, 255);
  if (!is_floating(from)) return whole_values(shape, 8, from, -1000, 1000);
  return grid_values(shape, 8, from, -4, 4);
}

OpCase make_cast(int64_t n, DType from) {
  OpCase c = case_for({n});
  c.inputs = {cast_source({n}, from)};
  const CastPlan plan = cast_plan(from);
  c.run = [plan](Device, Args& a) { return Outputs{ops::cast(a[0], plan.to, plan.scale)}; };
  return c;
}

// Into an existing tensor of another shape with as many elements.
OpCase make_cast_(int64_t n, DType from) {
  const Matrix m = matrix(n, 31);
  OpCase c = case_for({m.rows, m.cols});
  const CastPlan plan = cast_plan(from);
  c.inputs = {cast_source({m.rows, m.cols}, from), Tensor::zeros({m.rows * m.cols}, plan.to)};
  c.run = [plan](Device, Args& a) {
    ops::cast_(a[1], a[0], plan.scale);
    return Outputs{a[1]};
  };
  c.bytes = static_cast<double>(c.inputs[0].nbytes() + c.inputs[1].nbytes());
  return c;
}

// Every other column of a square-ish x (rows, cols), transposed: a view with two non-unit strides that contiguous()
// gathers into (cols / 2, rows).
OpCase make_contiguous(int64_t n, DType dtype) {
  const int64_t rows = std::max<int64_t>(odd_side(2 * n, 1), 2), cols = std::max<int64_t>(2 * n / rows, 3);
  OpCase c = case_for({(cols + 1) / 2, rows});
  c.inputs = {is_floating(dtype) ? grid_values({rows, cols}, 9, dtype) : whole_values({rows, cols}, 9, dtype, 0, 200)};
  c.run = [](Device, Args& a) {
    Tensor view = a[0].slice(1, 0, a[0].size(1), 2).t();
    EMBER_ASSERT(!view.is_contiguous(), "the contiguous row's view must be strided");
    return Outputs{view.contiguous()};
  };
  c.bytes = 2.0 * static_cast<double>(c.elements) * static_cast<double>(dtype_size(dtype));  // gathered, written
  return c;
}

OpCase make_dropout_mask(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.run = [n, dtype](Device device, Args&) { return Outputs{ops::dropout_mask({n}, 0.3, 42, 5, dtype, device)}; };
  return c;
}

OpCase make_rand(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.run = [n, dtype](Device device, Args&) { return Outputs{Tensor::rand({n}, 7, dtype, device, -2, 3, 11)}; };
  return c;
}

OpCase make_randn(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.run = [n, dtype](Device device, Args&) { return Outputs{Tensor::randn({n}, 9, dtype, device, 0.5, 2, 3)}; };
  c.tolerance = tolerance(dtype, 1e-6, 1e-14);  // log, sqrt, sin and cos of libm and CUDA may differ by an ulp
  return c;
}

}  // namespace

std::vector<OpRow> elementwise_rows() {
  const char* fam = "elementwise";
  return {
      {"add", "ops::add", fam, "cpu::add", "cuda::add", kFloating,
       [](int64_t n, DType d) { return binary(n, d, ops::add); },
       "add: out = a + b (12 bytes per element)"},
      {"sub", "ops::sub", fam, "cpu::sub", "cuda::sub", kFloating,
       [](int64_t n, DType d) { return binary(n, d, ops::sub); }},
      {"mul", "ops::mul", fam, "cpu::mul", "cuda::mul", kFloating,
       [](int64_t n, DType d) { return binary(n, d, ops::mul); }},
      {"scale", "ops::scale", fam, "cpu::scale", "cuda::scale", kFloating,
       [](int64_t n, DType d) { return unary(n, d, [](const Tensor& a) { return ops::scale(a, 0.375); }); }},
      {"add_", "ops::add_", fam, "cpu::axpy", "cuda::axpy", kFloating, make_add_,
       "add_: self += 0.75 other, gradient accumulation (12 bytes per element)"},
      {"fill_", "ops::fill_", fam, "cpu::fill", "cuda::fill", kAllDTypes, make_fill_},
      {"add_bias", "ops::add_bias", fam, "cpu::add_bias", "cuda::add_bias", kFloating, make_add_bias,
       "add_bias: x (rows, 257) + bias (257) (8 bytes per element)"},
      {"relu", "ops::relu", fam, "cpu::relu", "cuda::relu", kFloating,
       [](int64_t n, DType d) { return unary(n, d, ops::relu); },
       "relu: max(x, 0) (8 bytes per element)"},
      {"relu_backward", "ops::relu_backward", fam, "cpu::relu_backward", "cuda::relu_backward", kFloating,
       [](int64_t n, DType d) { return binary(n, d, ops::relu_backward); }},
  };
}

std::vector<OpRow> copy_rows() {
  const std::vector<DType> sources = {DType::U8, DType::I32, DType::I64, DType::F32, DType::F64};
  return {
      {"cast", "ops::cast", "copy", "cpu::cast", "cuda::cast", sources, make_cast,
       "cast: u8 images to f32 scaled by 1/255 (5 bytes per element)"},
      {"cast_", "ops::cast_", "copy", "cpu::cast", "cuda::cast", sources, make_cast_},
      {"contiguous", "Tensor::contiguous", "copy", "cpu::strided_copy", "cuda::strided_copy", kAllDTypes,
       make_contiguous, "contiguous: gather every other column of a matrix, transposed (8 bytes per element)"},
  };
}

std::vector<OpRow> random_rows() {
  return {
      {"dropout_mask", "ops::dropout_mask", "random", "cpu::dropout_mask", "cuda::dropout_mask", kFloating,
       make_dropout_mask},
      {"rand", "Tensor::rand", "random", "cpu::uniform", "cuda::uniform", kFloating, make_rand},
      {"randn", "Tensor::randn", "random", "cpu::normal", "cuda::normal", kFloating, make_randn},
  };
}

}  // namespace ember::ops::registry
