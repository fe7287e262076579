// The byte-level BERT of `ember train --model bert` (the peer ../shared/peers/torch_bert.py): a token embedding of
// the 256 bytes and [MASK] plus a learned position embedding, LayerNorm and dropout, post-norm encoder layers
// (BERT's order) with GELU, and a head Linear + GELU + LayerNorm + Linear back to the vocabulary. Its state_dict
// names are the peer module's (tok.weight, pos, emb_norm.*, encoder.layers.N.*, head.0/2/3.*), so PyTorch's
// load_state_dict(strict=True) takes ember's checkpoint and ember takes the peer's.
#pragma once

#include <memory>

#include "models/architecture.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layernorm.h"
#include "nn/transformer.h"

namespace ember::models {

class BertMaskedLM : public nn::Module {
 public:
  // arch.kind == "bert"; arch.classes is the vocabulary, arch.seq_len the position table's length.
  BertMaskedLM(const Architecture& arch, Device device = Device::cpu(), Generator& generator = default_generator());
  // ids (B, T) int64 with T <= seq_len -> logits (B, T, vocabulary) at every position.
  Tensor forward(const Tensor& ids) override;
  // The logits (M, vocabulary) at `positions` (M) int64 only, each b * T + t: what a masked-LM loss needs, without the
  // head's work at the positions the loss leaves out (the same loss and gradients as the head on every position).
  Tensor forward(const Tensor& ids, const Tensor& positions);
  // The parameter gradients from the last forward's; the input is ids, so the result is an undefined Tensor.
  Tensor backward(const Tensor& grad_out) override;
  void set_input_grad(bool needed) override;
  std::string type_name() const override { return "BertMaskedLM"; }
  const Architecture& arch() const { return arch_; }

 private:
  Tensor encode(const Tensor& ids);  // (B, T, dim): the encoder's output

  Architecture arch_;
  std::shared_ptr<nn::Embedding> tok_;
  nn::ParameterPtr pos_;
  std::shared_ptr<nn::LayerNorm> emb_norm_;
  std::shared_ptr<nn::Dropout> drop_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Sequential> head_;
  Shape hidden_shape_;  // (B, T, dim) of the last forward
  Tensor positions_;    // the last forward's positions, or undefined when it took every position
};

}  // namespace ember::models
