// MultiheadAttention: forward and backward as the op sequence in1 GEMM -> split heads -> attention -> merge heads
// -> out_proj, and back through each.
#include "nn/attention.h"

#include <cmath>

#include "core/ops.h"
#include "nn/init.h"

namespace ember::nn {

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias,
                                       bool batch_first, DType dtype, Device device, Generator& generator)
    : embed_dim_(embed_dim), heads_(num_heads), dropout_(dropout), batch_first_(batch_first), generator_(&generator) {
  EMBER_CHECK(embed_dim > 0 && num_heads > 0, ValueError, "MultiheadAttention(", embed_dim, ", ", num_heads,
              "): embed_dim and num_heads must be positive");
  EMBER_CHECK(embed_dim % num_heads == 0, ValueError, "MultiheadAttention: embed_dim ", embed_dim,
              " is not divisible by num_heads ", num_heads, "; choose a head count that divides it");
  EMBER_CHECK(dropout >= 0 && dropout < 1, ValueError, "MultiheadAttention: dropout must be in [0, 1), got ", dropout);
  // PyTorch's initialisation: xavier_uniform for the packed projection, zero biases, out_proj as a Linear's weight.
  const double xavier = std::sqrt(6.0 / static_cast<double>(embed_dim + 3 * embed_dim));
  in_proj_weight_ = register_parameter("in_proj_weight", uniform_init({3 * embed_dim, embed_dim}, xavier, dtype, device,
                                                                       generator));
  if (bias) in_proj_bias_ = register_parameter("in_proj_bias", Tensor::zeros({3 * embed_dim}, dtype, device));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, dtype, device, generator));
  if (bias) ops::fill_(out_proj_->bias()->value, 0);
}

Tensor MultiheadAttention::forward(const Tensor& x_in, const AttentionMask& mask) {
  check_input(x_in, embed_dim_);
  EMBER_CHECK(x_in.dim() == 3, ShapeError, path(), " (MultiheadAttention) expects input ",
              batch_first_ ? "(batch, tokens, embed_dim)" : "(tokens, batch, embed_dim)", ", but got shape ",
              shape_str(x_in.shape()));
  const Tensor x = batch_first_ ? x_in.contiguous() : x_in.transpose(0, 1).contiguous();
  const int64_t b = x.size(0), t = x.size(1);
  input_ = x.view({b * t, embed_dim_});
  const Tensor qkv = ops::linear(input_, in_proj_weight_->value, in_proj_bias_ ? in_proj_bias_->value : Tensor());
  qkv_ = ops::split_heads(qkv.view({b, t, 3 * embed_dim_}), heads_, 3);
  padding_ = mask.key_padding_mask;
  options_ = ops::AttentionOptions{.causal = mask.causal};
  if (is_training() && dropout_ > 0) {
    // A fresh stretch of the generator's stream for each call: the op keys its mask by this seed alone.
    const uint64_t offset = generator_->reserve(static_cast<uint64_t>(b * heads_ * t * t));
    options_.dropout_p = dropout_;
    options_.seed = philox_bits(generator_->seed(), offset);
  }
  saved_ = ops::attention(qkv_.select(0, 0), qkv_.select(0, 1), qkv_.select(0, 2), padding_, options_);
  const Tensor y = (*out_proj_)(ops::merge_heads(saved_.output.view({1, b, heads_, t, embed_dim_ / heads_})));
  return batch_first_ ? y : y.transpose(0, 1).contiguous();
}

Tensor MultiheadAttention::backward(const Tensor& grad_out) {
  check_forward_ran(input_.defined());
  check_input(grad_out, embed_dim_);
  const Tensor g = batch_first_ ? grad_out : grad_out.transpose(0, 1).contiguous();
  const Tensor grad_heads = ops::split_heads(out_proj_->backward(g), heads_, 1).select(0, 0);
  const ops::AttentionGrads d = ops::attention_backward(grad_heads, qkv_.select(0, 0), qkv_.select(0, 1),
                                                        qkv_.select(0, 2), padding_, saved_, options_);
  Tensor grad_qkv_heads = Tensor::empty(qkv_.shape(), qkv_.dtype(), qkv_.device());
  grad_qkv_heads.select(0, 0).copy_from(d.q);
  grad_qkv_heads.select(0, 1).copy_from(d.k);
  grad_qkv_heads.select(0, 2).copy_from(d.v);
  const int64_t b = qkv_.size(1), t = qkv_.size(3);
  const Tensor grad_qkv = ops::merge_heads(grad_qkv_heads).view({b * t, 3 * embed_dim_});
  Tensor grad_in = ops::linear_backward(grad_qkv, input_, in_proj_weight_->value, in_proj_weight_->grad, input_grad());
  if (in_proj_bias_) ops::sum_rows_(in_proj_bias_->grad, grad_qkv, 1);
  if (!grad_in.defined()) return grad_in;
  grad_in = grad_in.view({b, t, embed_dim_});
  return batch_first_ ? grad_in : grad_in.transpose(0, 1).contiguous();
}

}  // namespace ember::nn
