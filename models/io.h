// The one way a model goes to and from a file, for every architecture: model.safetensors holds the state_dict
// (parameters and BatchNorm buffers) under PyTorch's names (an nn.Sequential's, or the ViT peer module's), so PyTorch's load_state_dict(strict=True)
// takes it, and ember reads back ember's or PyTorch's files by the names and shapes of their tensors alone.
#pragma once

#include <memory>
#include <string>

#include "models/architecture.h"

namespace ember::models {

// Writes model.state_dict() with metadata {"format": "pt", "ember_architecture": arch.str()}, atomically.
void save_model(const std::string& path, const nn::Module& model, const Architecture& arch);

struct Network {
  std::shared_ptr<nn::Module> model;
  Architecture arch;
};
// Reads a model file of any kind: a class_token makes it a ViT (models/vit.h), a
// tok.weight a BERT (models/bert.h), 4-d weights a CNN, else an MLP. FormatError naming the file when the
// tensors do not form one of them. A file does not hold the dropout rate: `dropout` sets it, and the model is built
// by make_model with `generator` (which must outlive it) before the file's values replace the initial ones.
Network load_model(const std::string& path, Device device = Device::cpu(), double dropout = 0.25,
                   Generator& generator = default_generator());

}  // namespace ember::models
