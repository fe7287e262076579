// Embedding, PyTorch's nn.Embedding(num_embeddings, embedding_dim): a lookup table `weight` (V, E) initialised
// N(0, 1), read by integer ids.
#pragma once

#include "core/generator.h"
#include "nn/module.h"

namespace ember::nn {

// forward(ids) takes int32 or int64 ids of any shape, each in [0, num_embeddings) (ValueError naming the first bad
// one), and returns (*ids.shape, embedding_dim). backward(grad_out) adds the rows of grad_out into weight's grad at
// their ids and returns an undefined Tensor: integer ids have no gradient, so input_grad() is always false.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype = DType::F32, Device device = Device::cpu(),
            Generator& generator = default_generator());
  Tensor forward(const Tensor& ids) override;
  Tensor backward(const Tensor& grad_out) override;
  std::string type_name() const override { return "Embedding"; }
  // Ignored: there is no gradient w.r.t. ids to return (PyTorch: integer tensors cannot require grad).
  void set_input_grad(bool) override {}

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  const ParameterPtr& weight() const { return weight_; }

 private:
  // DeviceMismatchError naming this module when ids are not on the weight's device (Module::check_input would
  // also demand the weight's floating dtype of them).
  void check_ids_device(const Tensor& ids) const;

  int64_t num_embeddings_, embedding_dim_;
  ParameterPtr weight_;
  Tensor ids_;  // the last forward's, for backward
};

}  // namespace ember::nn
