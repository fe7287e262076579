// Registry rows of the Transformer's families: layer normalisation (kernels/layernorm.h) and GELU
// (kernels/gelu.h), in both of PyTorch's forms.
#include "core/ops/registry_cases.h"

namespace ember::ops::registry {

namespace {

constexpr int64_t kWidth = 77;  // odd, past two warps' worth of lanes, not a multiple of 32

// Row sums in double, then a division and a square root: the twins may differ by a few ulps.
double layer_norm_tolerance(DType dtype) { return tolerance(dtype, 2e-5, 1e-12); }
// erf, exp and tanh from two libraries.
double gelu_tolerance(DType dtype) { return tolerance(dtype, 1e-6, 1e-14); }

// x with a per-row offset (0.75 * (r % 5 - 2)), so rows differ in mean as well as in spread.
Tensor layer_norm_input(const Matrix& m, uint64_t seed, DType dtype) {
  Tensor x = smooth_values({m.rows, m.cols}, seed, DType::F64, -2, 3);
  double* p = x.data<double>();
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t col = 0; col < m.cols; ++col) p[r * m.cols + col] += 0.75 * static_cast<double>(r % 5 - 2);
  return x.to(dtype);
}

OpCase make_layer_norm(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kWidth);
  OpCase c = case_for({m.rows, m.cols});
  c.inputs = {layer_norm_input(m, 61, dtype), smooth_values({m.cols}, 63, dtype, 0.5, 1.5),
              smooth_values({m.cols}, 64, dtype, -0.5, 0.5)};
  c.run = [](Device, Args& a) {
    LayerNormResult r = ops::layer_norm(a[0], a[1], a[2]);
    return Outputs{r.output, r.mean, r.rstd};
  };
  c.tolerance = layer_norm_tolerance(dtype);
  return c;
}

// mean and rstd come from the host forward; grad_weight and grad_bias start non-zero (backward adds to them).
OpCase make_layer_norm_backward(int64_t n, DType dtype) {
  const Matrix m = matrix(n, kWidth);
  OpCase c = case_for({m.rows, m.cols});
  Tensor x = layer_norm_input(m, 65, dtype), w = smooth_values({m.cols}, 67, dtype, 0.5, 1.5);
  LayerNormResult fwd = ops::layer_norm(x, w, Tensor());
  c.inputs = {smooth_values({m.rows, m.cols}, 68, dtype), x, w, fwd.mean, fwd.rstd,
              smooth_values({m.cols}, 69, dtype), smooth_values({m.cols}, 70, dtype)};
  c.run = [](Device, Args& a) {
    LayerNormResult saved{Tensor(), a[3], a[4]};
    Tensor dx = ops::layer_norm_backward(a[0], a[1], a[2], saved, a[5], a[6]);
    return Outputs{dx, a[5], a[6]};
  };
  c.tolerance = layer_norm_tolerance(dtype);
  return c;
}

// Values out to +-6: both tails, where erf and tanh saturate.
template <bool kTanh>
OpCase make_gelu(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.inputs = {smooth_values({n}, 71, dtype, -6, 6)};
  c.run = [](Device, Args& a) { return Outputs{ops::gelu(a[0], kTanh ? "tanh" : "none")}; };
  c.tolerance = gelu_tolerance(dtype);
  return c;
}

template <bool kTanh>
OpCase make_gelu_backward(int64_t n, DType dtype) {
  OpCase c = case_for({n});
  c.inputs = {smooth_values({n}, 72, dtype), smooth_values({n}, 73, dtype, -6, 6)};
  c.run = [](Device, Args& a) { return Outputs{ops::gelu_backward(a[0], a[1], kTanh ? "tanh" : "none")}; };
  c.tolerance = gelu_tolerance(dtype);
  return c;
}

}  // namespace

std::vector<OpRow> layernorm_rows() {
  const char* fam = "layernorm";
  return {
      {"layer_norm", "ops::layer_norm", fam, "cpu::layernorm_forward", "cuda::layernorm_forward", kFloating,
       make_layer_norm, "layer_norm: LayerNorm forward over 77 columns, weight and bias"},
      {"layer_norm_backward", "ops::layer_norm_backward", fam, "cpu::layernorm_backward", "cuda::layernorm_backward",
       kFloating, make_layer_norm_backward, "layer_norm_backward: dx, dweight and dbias over 77 columns"},
  };
}

std::vector<OpRow> gelu_rows() {
  const char* fam = "gelu";
  return {
      {"gelu", "ops::gelu", fam, "cpu::gelu", "cuda::gelu", kFloating, make_gelu<false>,
       "gelu: the exact erf form (8 bytes per element)"},
      {"gelu_tanh", "ops::gelu", fam, "cpu::gelu", "cuda::gelu", kFloating, make_gelu<true>},
      {"gelu_backward", "ops::gelu_backward", fam, "cpu::gelu_backward", "cuda::gelu_backward", kFloating,
       make_gelu_backward<false>, "gelu_backward: the exact erf form (12 bytes per element)"},
      {"gelu_tanh_backward", "ops::gelu_backward", fam, "cpu::gelu_backward", "cuda::gelu_backward", kFloating,
       make_gelu_backward<true>},
  };
}

}  // namespace ember::ops::registry
