// The Vision Transformer of `ember train --model vit` (the peer ../shared/peers/torch_vit.py): images cut into
// patches, each projected to the model width, a learned class token in front and a learned position embedding
// added, pre-norm encoder layers, a final LayerNorm on the class token and a Linear head. Its state_dict names are
// the peer module's (class_token, pos_embedding, patch_embed.*, encoder.layers.N.*, norm.*, head.*), so PyTorch's
// load_state_dict(strict=True) takes ember's checkpoint and ember takes the peer's.
#pragma once

#include <memory>

#include "models/architecture.h"
#include "nn/layernorm.h"
#include "nn/linear.h"
#include "nn/transformer.h"

namespace ember::models {

class VisionTransformer : public nn::Module {
 public:
  // arch.kind == "vit"; the input normalisation (arch.input_mean, arch.input_std) is applied to the [0, 1] pixels.
  VisionTransformer(const Architecture& arch, Device device = Device::cpu(), Generator& generator = default_generator());
  // images (B, C, H, W) in [0, 1] -> logits (B, classes).
  Tensor forward(const Tensor& images) override;
  // The parameter gradients; the input is data, so the result is an undefined Tensor (set_input_grad(true)
  // is refused: patches have no gradient back to the pixels here).
  Tensor backward(const Tensor& grad_out) override;
  void set_input_grad(bool needed) override;
  std::string type_name() const override { return "VisionTransformer"; }

 private:
  Architecture arch_;
  nn::ParameterPtr class_token_, pos_embedding_;
  std::shared_ptr<nn::Linear> patch_embed_, head_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::LayerNorm> norm_;
  Shape tokens_shape_;  // (B, patches + 1, dim) of the last forward
};

}  // namespace ember::models
