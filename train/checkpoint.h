// Model and training-state checkpoints on top of safetensors. model.safetensors holds only the
// weights under PyTorch's nn.Sequential names ("0.weight" (256, 784), "0.bias", "2.weight", ...) with
// metadata {"format": "pt", "ember_architecture": "784-256-128-10"}, so PyTorch can load_state_dict
// it; state.safetensors holds the optimizer state, epoch, step and the run's config for exact resume.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "nn/layers.h"
#include "train/optim.h"
#include "train/safetensors.h"

namespace ember::train {

// An MLP of Linear layers with ReLU between them: sizes {784, 256, 128, 10}.
std::shared_ptr<nn::Sequential> make_mlp(const std::vector<int64_t>& sizes, Device device = Device::cpu(),
                                         Generator& generator = default_generator());
std::string architecture_string(const std::vector<int64_t>& sizes);  // "784-256-128-10"

void save_model(const std::string& path, const nn::Module& model, const std::vector<int64_t>& sizes);

struct LoadedModel {
  std::shared_ptr<nn::Sequential> model;
  std::vector<int64_t> sizes;
};
// Loads an ember- or PyTorch-written file of a Linear/ReLU Sequential, inferring the layer sizes
// from the weight shapes. FormatError (naming the file) when the tensors do not form such an MLP.
LoadedModel load_mlp(const std::string& path, Device device = Device::cpu());

struct TrainingState {
  optim::OptimizerState optimizer;
  int64_t epochs_done = 0;  // completed epochs
  int64_t step = 0;         // optimizer steps taken
  uint64_t rng_offset = 0;  // position of the run's generator (dropout masks) on its Philox stream
  std::string config_json;  // the run's configuration
  std::string history_json; // per-epoch metrics so far (a JSON array)
};
void save_training_state(const std::string& path, const TrainingState& state);
TrainingState load_training_state(const std::string& path);

}  // namespace ember::train
