// TransformerEncoderLayer and TransformerEncoder, PyTorch's nn.TransformerEncoderLayer / nn.TransformerEncoder:
// self-attention and a feed-forward block, each inside a residual, with LayerNorm after (BERT's order,
// norm_first = false) or before (norm_first = true) each. The children and state_dict names are PyTorch's:
// self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2; an encoder's layers are layers.0, ...
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/layernorm.h"

namespace ember::nn {

struct TransformerEncoderLayerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;  // (B, T, E) when true, else (T, B, E)
  bool norm_first = false;
};

class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerEncoderLayerOptions& options, DType dtype = DType::F32,
                                   Device device = Device::cpu(), Generator& generator = default_generator());
  Tensor forward(const Tensor& x) override { return forward(x, AttentionMask{}); }
  Tensor forward(const Tensor& x, const AttentionMask& mask);
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "TransformerEncoderLayer"; }
  const TransformerEncoderLayerOptions& options() const { return options_; }

 private:
  // linear2(dropout(activation(linear1(x)))) and its backward.
  Tensor feed_forward(const Tensor& x);
  Tensor feed_forward_backward(const Tensor& grad);

  TransformerEncoderLayerOptions options_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
  std::shared_ptr<Module> activation_;
  bool ran_ = false;
};

// num_layers layers built alike, then the optional final norm. As PyTorch's (which deep-copies the layer it is
// given), every layer starts with the same weights as layer 0; they part as they train.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayerOptions& layer, int64_t num_layers, bool final_norm = false,
                     DType dtype = DType::F32, Device device = Device::cpu(),
                     Generator& generator = default_generator());
  Tensor forward(const Tensor& x) override { return forward(x, AttentionMask{}); }
  Tensor forward(const Tensor& x, const AttentionMask& mask);
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "TransformerEncoder"; }
  size_t num_layers() const { return layers_.size(); }
  TransformerEncoderLayer& layer(size_t i) const { return *layers_.at(i); }

 private:
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers_;  // children of the "layers" container
  std::shared_ptr<LayerNorm> norm_;                                // null without a final norm
};

}  // namespace ember::nn
