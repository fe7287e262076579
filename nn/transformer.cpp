// The encoder layer's two residual blocks, in PyTorch's order, and their backward in reverse: a residual's
// gradient is the sum of the gradient through its block and the one that skips it.
#include "nn/transformer.h"

#include "core/ops.h"

namespace ember::nn {

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerOptions& o, DType dtype, Device device,
                                                 Generator& generator)
    : options_(o) {
  EMBER_CHECK(o.activation == "relu" || o.activation == "gelu", ValueError,
              "TransformerEncoderLayer: activation must be \"relu\" or \"gelu\", got \"", o.activation, "\"");
  EMBER_CHECK(o.dim_feedforward > 0, ValueError, "TransformerEncoderLayer: dim_feedforward must be positive, got ",
              o.dim_feedforward);
  self_attn_ = register_module("self_attn", std::make_shared<MultiheadAttention>(
                                                o.d_model, o.nhead, o.dropout, true, o.batch_first, dtype, device, generator));
  linear1_ = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, true, dtype, device, generator));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(o.dropout, generator));
  linear2_ = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, true, dtype, device, generator));
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps, true, dtype, device));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps, true, dtype, device));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(o.dropout, generator));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(o.dropout, generator));
  if (o.activation == "gelu") activation_ = register_module("activation", std::make_shared<GELU>());
  else activation_ = register_module("activation", std::make_shared<ReLU>());
}

Tensor TransformerEncoderLayer::feed_forward(const Tensor& x) {
  return dropout2_->forward(linear2_->forward(dropout_->forward(activation_->forward(linear1_->forward(x)))));
}

Tensor TransformerEncoderLayer::feed_forward_backward(const Tensor& g) {
  return linear1_->backward(activation_->backward(dropout_->backward(linear2_->backward(dropout2_->backward(g)))));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const AttentionMask& mask) {
  check_input(x, options_.d_model);
  ran_ = true;
  if (options_.norm_first) {
    const Tensor h = x + dropout1_->forward(self_attn_->forward(norm1_->forward(x), mask));
    return h + feed_forward(norm2_->forward(h));
  }
  const Tensor h = norm1_->forward(x + dropout1_->forward(self_attn_->forward(x, mask)));
  return norm2_->forward(h + feed_forward(h));
}

Tensor TransformerEncoderLayer::backward(const Tensor& grad_out) {
  check_forward_ran(ran_);
  check_input(grad_out, options_.d_model);
  if (options_.norm_first) {
    const Tensor grad_h = grad_out + norm2_->backward(feed_forward_backward(grad_out));
    return grad_h + norm1_->backward(self_attn_->backward(dropout1_->backward(grad_h)));
  }
  const Tensor grad_sum2 = norm2_->backward(grad_out);
  const Tensor grad_h = grad_sum2 + feed_forward_backward(grad_sum2);
  const Tensor grad_sum1 = norm1_->backward(grad_h);
  return grad_sum1 + self_attn_->backward(dropout1_->backward(grad_sum1));
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayerOptions& layer, int64_t num_layers, bool final_norm,
                                       DType dtype, Device device, Generator& generator) {
  EMBER_CHECK(num_layers > 0, ValueError, "TransformerEncoder: num_layers must be positive, got ", num_layers);
  auto list = register_module("layers", std::make_shared<Sequential>());
  for (int64_t i = 0; i < num_layers; ++i) {
    layers_.push_back(std::make_shared<TransformerEncoderLayer>(layer, dtype, device, generator));
    list->push_back(layers_.back());
  }
  // PyTorch's nn.TransformerEncoder deep-copies one layer: every layer starts with the first one's weights. (It
  // matters: with layers drawn independently, the BERT of torch_bert.py left the unigram plateau ~500 steps later.)
  const std::vector<ParameterPtr> first = layers_[0]->parameters();
  for (size_t i = 1; i < layers_.size(); ++i) {
    const std::vector<ParameterPtr> mine = layers_[i]->parameters();
    for (size_t k = 0; k < first.size(); ++k) mine[k]->value.copy_from(first[k]->value);
  }
  if (final_norm)
    norm_ = register_module("norm", std::make_shared<LayerNorm>(layer.d_model, layer.layer_norm_eps, true, dtype, device));
}

Tensor TransformerEncoder::forward(const Tensor& x, const AttentionMask& mask) {
  Tensor h = x;
  for (const auto& layer : layers_) h = layer->forward(h, mask);
  return norm_ ? norm_->forward(h) : h;
}

Tensor TransformerEncoder::backward(const Tensor& grad_out) {
  Tensor g = norm_ ? norm_->backward(grad_out) : grad_out;
  for (size_t i = layers_.size(); i-- > 0;) g = layers_[i]->backward(g);
  return g;
}

}  // namespace ember::nn
