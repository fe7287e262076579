// The training-state checkpoint: what --resume reads back must be exactly what was saved.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "train/checkpoint.h"

using namespace ember;
namespace fs = std::filesystem;

TEST_CASE("A training state loads back bit for bit: optimizer scalars and tensors, epoch, step, config, history",
          "[train]") {
  const fs::path dir = fs::temp_directory_path() / ("ember_checkpoint_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "state.safetensors").string();

  train::TrainingState saved;
  saved.epochs_done = 3;
  saved.step = 1407;
  saved.config_json = R"({"lr": 0.05})";
  saved.history_json = R"([{"epoch": 1}])";
  // A cosine schedule's lr, a value 17 significant digits are needed for, and a large step count.
  saved.optimizer.scalars = {{"lr", 0.05 * 0.5 * (1 + std::cos(3.141592653589793 * 1407 / 9380))},
                             {"0.scale", 1.0 / 3.0},
                             {"0.step", 123456789012.0}};
  saved.optimizer.tensors = {{"0.exp_avg", Tensor::randn({4, 3}, 5, DType::F32)}};
  train::save_training_state(path, saved);
  const train::TrainingState loaded = train::load_training_state(path);
  fs::remove_all(dir);

  CHECK(loaded.epochs_done == 3);
  CHECK(loaded.step == 1407);
  CHECK(loaded.config_json == saved.config_json);
  CHECK(loaded.history_json == saved.history_json);
  CHECK(loaded.optimizer.scalars == saved.optimizer.scalars);  // exact: resume must not round
  REQUIRE(loaded.optimizer.tensors.size() == 1);
  CHECK(loaded.optimizer.tensors[0].first == "0.exp_avg");
  CHECK(loaded.optimizer.tensors[0].second.to_vector<float>() == saved.optimizer.tensors[0].second.to_vector<float>());
}
