// VisionTransformer: patchify -> patch_embed -> class token and position embedding -> encoder -> norm of the class
// token -> head, and back. Every step is an op with a CUDA kernel; nothing runs on the host per element.
#include "models/vit.h"

#include "core/ops.h"

namespace ember::models {

VisionTransformer::VisionTransformer(const Architecture& arch, Device device, Generator& generator) : arch_(arch) {
  arch.check();
  const int64_t dim = arch.dim, tokens = arch.patches() + 1;
  class_token_ = register_parameter("class_token", Tensor::zeros({1, 1, dim}, DType::F32, device));
  const uint64_t offset = generator.reserve(static_cast<uint64_t>(tokens * dim));
  pos_embedding_ = register_parameter(
      "pos_embedding", ops::scale(Tensor::randn({1, tokens, dim}, generator.seed(), DType::F32, device, 0, 1, offset), 0.02));
  patch_embed_ = register_module("patch_embed", std::make_shared<nn::Linear>(arch.patch_features(), dim, true,
                                                                             DType::F32, device, generator));
  const nn::TransformerEncoderLayerOptions layer{.d_model = dim, .nhead = arch.heads, .dim_feedforward = arch.feedforward,
                                                 .dropout = arch.dropout, .activation = "gelu", .layer_norm_eps = 1e-5,
                                                 .batch_first = true, .norm_first = true};
  encoder_ = register_module("encoder", std::make_shared<nn::TransformerEncoder>(layer, arch.depth, false, DType::F32,
                                                                                 device, generator));
  norm_ = register_module("norm", std::make_shared<nn::LayerNorm>(dim, 1e-5, true, DType::F32, device));
  head_ = register_module("head", std::make_shared<nn::Linear>(dim, arch.classes, true, DType::F32, device, generator));
  patch_embed_->set_input_grad(false);
  Module::set_input_grad(false);
}

void VisionTransformer::set_input_grad(bool needed) {
  EMBER_CHECK(!needed, ValueError, path(), " (VisionTransformer) takes images as data: it has no input gradient");
}

Tensor VisionTransformer::forward(const Tensor& images) {
  check_input(images);
  const Shape expected = arch_.batch_shape(images.dim() > 0 ? images.size(0) : 0);
  EMBER_CHECK(images.shape() == expected, ShapeError, path(), " (VisionTransformer) expects images of shape ",
              shape_str(expected), ", but got ", shape_str(images.shape()));
  const int64_t b = images.size(0), dim = arch_.dim;
  const Tensor patches = ops::patchify(images, arch_.patch, arch_.input_mean, arch_.input_std);
  Tensor x = ops::prepend_token((*patch_embed_)(patches), class_token_->value.view({dim}));
  tokens_shape_ = x.shape();
  x = ops::add_bias(x.view({b, x.numel() / b}), pos_embedding_->value.view({-1})).view(tokens_shape_);
  const Tensor first = (*encoder_)(x).select(1, 0).contiguous();
  return (*head_)((*norm_)(first));
}

Tensor VisionTransformer::backward(const Tensor& grad_out) {
  check_forward_ran(!tokens_shape_.empty());
  const int64_t b = tokens_shape_[0], tokens = tokens_shape_[1], dim = tokens_shape_[2];
  const Tensor grad_first = norm_->backward(head_->backward(grad_out));
  // Only token 0 reached the head: the encoder's output gradient is zero elsewhere.
  const Tensor grad_tokens = encoder_->backward(
      ops::prepend_token(Tensor::zeros({b, tokens - 1, dim}, grad_first.dtype(), grad_first.device()), grad_first));
  Tensor grad_pos = pos_embedding_->grad.view({-1}), grad_class = class_token_->grad.view({dim});
  ops::sum_rows_(grad_pos, grad_tokens.view({b, tokens * dim}), 1);
  ops::sum_rows_(grad_class, grad_tokens.select(1, 0).contiguous(), 1);
  patch_embed_->backward(grad_tokens.slice(1, 1, tokens).contiguous());
  return Tensor();
}

}  // namespace ember::models
