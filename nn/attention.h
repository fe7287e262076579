// MultiheadAttention, PyTorch's nn.MultiheadAttention for self-attention: parameters in_proj_weight (3E, E) and
// in_proj_bias (3E) (q, k and v projections packed), and out_proj (a Linear E -> E); dropout on the attention
// weights in training. One GEMM for q|k|v, one split into heads, the fused attention op, one merge, out_proj.
#pragma once

#include <memory>

#include "core/generator.h"
#include "core/ops/attention.h"
#include "nn/linear.h"

namespace ember::nn {

// What a self-attention may not look at: keys marked in key_padding_mask (uint8 (B, T), nonzero = padding, as
// PyTorch's True) and, when causal, every key after the query.
struct AttentionMask {
  Tensor key_padding_mask;
  bool causal = false;
};

class MultiheadAttention : public Module {
 public:
  // embed_dim divisible by num_heads; batch_first: inputs (B, T, E) (else (T, B, E), PyTorch's default).
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0, bool bias = true,
                     bool batch_first = false, DType dtype = DType::F32, Device device = Device::cpu(),
                     Generator& generator = default_generator());
  // Self-attention of x: query, key and value are all x.
  Tensor forward(const Tensor& x) override { return forward(x, AttentionMask{}); }
  Tensor forward(const Tensor& x, const AttentionMask& mask);
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "MultiheadAttention"; }

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return heads_; }
  bool batch_first() const { return batch_first_; }
  const ParameterPtr& in_proj_weight() const { return in_proj_weight_; }
  const ParameterPtr& in_proj_bias() const { return in_proj_bias_; }  // null without bias
  Linear& out_proj() const { return *out_proj_; }

 private:
  int64_t embed_dim_, heads_;
  double dropout_;
  bool batch_first_;
  Generator* generator_;
  ParameterPtr in_proj_weight_, in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;
  // What backward needs from the last forward.
  Tensor input_;  // (B * T, E), batch first
  Tensor qkv_;    // (3, B, H, T, D): the heads of q, k and v
  Tensor padding_;
  ops::AttentionOptions options_;
  ops::AttentionResult saved_;
};

}  // namespace ember::nn
