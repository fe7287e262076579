// The training state beside a run's model.safetensors (models/io.h): state.safetensors holds the optimizer state,
// epoch, step, the generator's position, the run's config and its history, for an exact resume.
#pragma once

#include <map>
#include <string>

#include "models/architecture.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace ember::train {

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

// What a run writes after every epoch: `dir`/model.safetensors (models/io.h) and `dir`/state.safetensors, each
// atomically, so an interrupted run resumes from its last complete epoch.
void save_checkpoint(const std::string& dir, const nn::Module& model, const models::Architecture& arch,
                     const TrainingState& state);

}  // namespace ember::train
