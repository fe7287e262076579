// BertMaskedLM: token + position embedding -> LayerNorm -> dropout -> encoder -> (the chosen positions) -> head, and
// back. Every step is an op with a CUDA kernel; the gather of the chosen positions is an embedding lookup into the
// encoder's output rows, its backward the embedding's scatter-add.
#include "models/bert.h"

#include "core/ops.h"
#include "nn/activation.h"
#include "nn/linear.h"

namespace ember::models {

BertMaskedLM::BertMaskedLM(const Architecture& arch, Device device, Generator& generator) : arch_(arch) {
  EMBER_CHECK(arch.is_bert(), ValueError, "BertMaskedLM needs a bert architecture, got ", arch.family());
  arch.check();
  const int64_t dim = arch.dim, vocab = arch.classes;
  // N(0, 0.02) for both tables, as BERT and the peer: with N(0, 1) tokens the position signal drowns.
  tok_ = register_module("tok", std::make_shared<nn::Embedding>(vocab, dim, DType::F32, device, generator));
  tok_->weight()->value.copy_from(ops::scale(tok_->weight()->value, 0.02));
  const uint64_t offset = generator.reserve(static_cast<uint64_t>(arch.seq_len * dim));
  pos_ = register_parameter(
      "pos", ops::scale(Tensor::randn({1, arch.seq_len, dim}, generator.seed(), DType::F32, device, 0, 1, offset), 0.02));
  emb_norm_ = register_module("emb_norm", std::make_shared<nn::LayerNorm>(dim, 1e-5, true, DType::F32, device));
  drop_ = register_module("drop", std::make_shared<nn::Dropout>(arch.dropout, generator));
  const nn::TransformerEncoderLayerOptions layer{.d_model = dim, .nhead = arch.heads, .dim_feedforward = arch.feedforward,
                                                 .dropout = arch.dropout, .activation = "gelu", .layer_norm_eps = 1e-5,
                                                 .batch_first = true, .norm_first = false};
  encoder_ = register_module("encoder", std::make_shared<nn::TransformerEncoder>(layer, arch.depth, false, DType::F32,
                                                                                 device, generator));
  head_ = register_module("head", std::make_shared<nn::Sequential>(
                                      std::make_shared<nn::Linear>(dim, dim, true, DType::F32, device, generator),
                                      std::make_shared<nn::GELU>(),
                                      std::make_shared<nn::LayerNorm>(dim, 1e-5, true, DType::F32, device),
                                      std::make_shared<nn::Linear>(dim, vocab, true, DType::F32, device, generator)));
  Module::set_input_grad(false);
}

void BertMaskedLM::set_input_grad(bool needed) {
  EMBER_CHECK(!needed, ValueError, path(), " (BertMaskedLM) takes byte ids: it has no input gradient");
}

Tensor BertMaskedLM::encode(const Tensor& ids) {
  EMBER_CHECK(ids.dim() == 2 && ids.size(1) >= 1, ShapeError, path(),
              " (BertMaskedLM) expects ids of shape (batch, tokens), but got ", shape_str(ids.shape()));
  const int64_t b = ids.size(0), t = ids.size(1), dim = arch_.dim;
  EMBER_CHECK(t <= arch_.seq_len, ShapeError, path(), " (BertMaskedLM): a window of ", t,
              " tokens is longer than the position table (", arch_.seq_len, "); use windows of at most ", arch_.seq_len,
              " bytes");
  hidden_shape_ = {b, t, dim};
  const Tensor pos = pos_->value.view({arch_.seq_len * dim}).slice(0, 0, t * dim);
  const Tensor x = ops::add_bias((*tok_)(ids).view({b, t * dim}), pos).view(hidden_shape_);
  return (*encoder_)((*drop_)((*emb_norm_)(x)));
}

Tensor BertMaskedLM::forward(const Tensor& ids) {
  positions_ = Tensor();
  return (*head_)(encode(ids));
}

Tensor BertMaskedLM::forward(const Tensor& ids, const Tensor& positions) {
  const Tensor hidden = encode(ids);
  positions_ = positions;
  return (*head_)(ops::embedding(hidden.view({hidden.numel() / arch_.dim, arch_.dim}), positions));
}

Tensor BertMaskedLM::backward(const Tensor& grad_out) {
  check_forward_ran(!hidden_shape_.empty());
  const int64_t b = hidden_shape_[0], t = hidden_shape_[1], dim = hidden_shape_[2];
  Tensor grad_hidden = head_->backward(grad_out);
  if (positions_.defined()) {  // the rows the head did not see have no gradient
    Tensor rows = Tensor::zeros({b * t, dim}, grad_hidden.dtype(), grad_hidden.device());
    ops::embedding_backward_(rows, grad_hidden, positions_);
    grad_hidden = rows.view(hidden_shape_);
  }
  const Tensor grad_x = emb_norm_->backward(drop_->backward(encoder_->backward(grad_hidden)));
  Tensor grad_pos = pos_->grad.view({arch_.seq_len * dim}).slice(0, 0, t * dim);
  ops::sum_rows_(grad_pos, grad_x.view({b, t * dim}), 1);
  tok_->backward(grad_x);
  return Tensor();
}

}  // namespace ember::models
