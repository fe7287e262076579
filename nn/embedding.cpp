// Embedding: one embedding op each way; the weight drawn N(0, 1) from the generator's Philox stream.
#include "nn/embedding.h"

#include "core/ops/embedding.h"

namespace ember::nn {

namespace {

// N(0, 1) as PyTorch initialises nn.Embedding; a normal value uses two stream words (kernels/random.h).
Tensor normal_init(const Shape& shape, DType dtype, Device device, Generator& generator) {
  const uint64_t offset = generator.reserve(2 * static_cast<uint64_t>(shape_numel(shape)));
  return Tensor::randn(shape, generator.seed(), dtype, device, 0, 1, offset);
}

}  // namespace

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype, Device device, Generator& generator)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  EMBER_CHECK(num_embeddings > 0 && embedding_dim > 0, ValueError, "Embedding(", num_embeddings, ", ", embedding_dim,
              "): num_embeddings and embedding_dim must be positive");
  weight_ = register_parameter("weight", normal_init({num_embeddings, embedding_dim}, dtype, device, generator));
  Module::set_input_grad(false);
}

void Embedding::check_ids_device(const Tensor& ids) const {
  EMBER_CHECK(ids.defined(), ValueError, path(), " (Embedding) got an undefined ids tensor");
  const Device mine = weight_->value.device();
  EMBER_CHECK(ids.device() == mine, DeviceMismatchError,
              "Expected all tensors to be on the same device, but ", path(), " (Embedding) got ids on ",
              ids.device().str(), " and its weight on ", mine.str(), ". Move the ids with .to(", mine.str(),
              ") inside the training loop, or the model with .to(", ids.device().str(), ").");
}

Tensor Embedding::forward(const Tensor& ids) {
  check_ids_device(ids);
  Tensor out = ops::embedding(weight_->value, ids);
  ids_ = ids;
  return out;
}

Tensor Embedding::backward(const Tensor& grad_out) {
  check_forward_ran(ids_.defined());
  check_input(grad_out, embedding_dim_);
  ops::embedding_backward_(weight_->grad, grad_out, ids_);
  return Tensor();
}

}  // namespace ember::nn
