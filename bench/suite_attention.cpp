// attention: the fused attention kernels (ops::attention, ops::attention_backward) against the unfused path a
// framework without them runs (cuBLAS's strided-batched GEMM for q k^T, a softmax kernel, GEMM again for P v, and
// the same five products and a softmax backward for the gradients), at the ViT's and BERT's shapes and a long
// sequence, on the host and on the device. FLOPs count the products alone: 4 B H T^2 D forward, 8 B H T^2 D backward.
#include <cmath>
#include <string>
#include <vector>

#include "bench/layer_case.h"
#include "core/ops.h"

namespace ember::bench {

namespace {

const char* kTable = "attention (B, H, T, D), FP32: fused kernels vs GEMMs + softmax (cuBLAS on CUDA)";

struct Shape4 {
  const char* what;
  int64_t b, h, t, d;
};

// The GEMMs of the unfused path on cuBLAS (on the host OpenBLAS either way), the previous backend restored after.
struct CublasScope {
  ops::GemmBackend saved = ops::gemm_backend();
  CublasScope() { ops::set_gemm_backend(ops::GemmBackend::Cublas); }
  ~CublasScope() { ops::set_gemm_backend(saved); }
};

// softmax(scale q k^T) over the keys, as (B * H, T, T).
Tensor unfused_weights(const Tensor& q, const Tensor& k) {
  const int64_t bh = q.size(0) * q.size(1), t = q.size(2), d = q.size(3);
  const Tensor s = ops::bmm(q.view({bh, t, d}), k.view({bh, t, d}), false, true);
  return ops::softmax(ops::scale(s, 1.0 / std::sqrt(double(d))).view({bh * t, t})).view({bh, t, t});
}

Tensor unfused_forward(const std::vector<Tensor>& in) {
  CublasScope cublas;
  const Tensor& v = in[2];
  const int64_t bh = v.size(0) * v.size(1), t = v.size(2), d = v.size(3);
  return ops::bmm(unfused_weights(in[0], in[1]), v.view({bh, t, d}));
}

// dq from dP = dO v^T, dS = softmax'(dP) * scale, dq = dS k (dk = dS^T q and dv = P^T dO cost the same again).
Tensor unfused_backward(const std::vector<Tensor>& in) {
  CublasScope cublas;
  const Tensor &q = in[0], &k = in[1], &v = in[2], &dout = in[3];
  const int64_t bh = q.size(0) * q.size(1), t = q.size(2), d = q.size(3);
  const Tensor p = unfused_weights(q, k), g = dout.view({bh, t, d});
  const Tensor dp = ops::bmm(g, v.view({bh, t, d}), false, true);
  const Tensor ds = ops::scale(ops::softmax_backward(p.view({bh * t, t}), dp.view({bh * t, t})), 1.0 / std::sqrt(double(d)))
                        .view({bh, t, t});
  Tensor dk = ops::bmm(ds, q.view({bh, t, d}), true, false), dv = ops::bmm(p, g, true, false);
  return ops::bmm(ds, k.view({bh, t, d}));
}

void add_cases(std::vector<LayerCase>& cases, const Shape4& s) {
  const double flops = 4.0 * double(s.b * s.h * s.t * s.t * s.d);
  const std::string shape = std::string(" ") + s.what + " (" + std::to_string(s.b) + "," + std::to_string(s.h) + "," +
                            std::to_string(s.t) + "," + std::to_string(s.d) + ")";
  const Tensor q = uniform({s.b, s.h, s.t, s.d}, 11), k = uniform({s.b, s.h, s.t, s.d}, 12),
               v = uniform({s.b, s.h, s.t, s.d}, 13), dout = uniform({s.b, s.h, s.t, s.d}, 14);
  cases.push_back({"attention", kTable, "attention_fused", "fused forward" + shape, s.b, flops, 0, {q, k, v},
                   [](const std::vector<Tensor>& t) { return ops::attention(t[0], t[1], t[2], Tensor()).output; }});
  cases.push_back({"attention", kTable, "attention_unfused", "GEMM+softmax forward" + shape, s.b, flops, 0, {q, k, v},
                   unfused_forward});
  cases.push_back({"attention", kTable, "attention_backward_fused", "fused backward" + shape, s.b, 2 * flops, 0,
                   {q, k, v, dout}, [](const std::vector<Tensor>& t) {
                     const ops::AttentionResult saved = ops::attention(t[0], t[1], t[2], Tensor());
                     return ops::attention_backward(t[3], t[0], t[1], t[2], Tensor(), saved).q.view(
                         {t[0].size(0) * t[0].size(1), t[0].size(2), t[0].size(3)});
                   }});
  cases.push_back({"attention", kTable, "attention_backward_unfused", "GEMM+softmax backward" + shape, s.b, 2 * flops,
                   0, {q, k, v, dout}, unfused_backward});
}

}  // namespace

void run_attention(BenchContext& ctx) {
  std::vector<Shape4> shapes = {{"ViT", 128, 4, 17, 16}, {"BERT", 64, 4, 64, 32}, {"long", 4, 8, 512, 64}};
  if (ctx.emulated()) shapes = {{"small", 2, 2, 17, 16}};
  else if (ctx.quick) shapes.resize(2);
  std::vector<LayerCase> cases;
  for (const Shape4& s : shapes) add_cases(cases, s);
  for (const LayerCase& c : cases) measure_layer(ctx, c);
}

}  // namespace ember::bench
