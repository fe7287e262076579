// `ember train --device cuda` end to end (the real binary, the real data): it trains, moves its batches over the
// bus, and its loss follows the same run on the host.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_ember.h"
#include "train/dataset.h"

namespace fs = std::filesystem;

namespace {

nlohmann::json train(const std::string& device, const fs::path& dir) {
  const ember::test::EmberRun r =
      ember::test::run_ember("train --device " + device + " --limit 4096 --epochs 1 --seed 3 --out " + dir.string() +
                             " --metrics-json " + (dir / "m.json").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::ifstream f(dir / "m.json");
  return nlohmann::json::parse(std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()));
}

}  // namespace

TEST_CASE("ember train --device cuda trains like the host run of the same seed", "[cuda][apps]") {
  if (!fs::exists(fs::path(ember::train::default_fashion_mnist_dir()) / "train-images-idx3-ubyte.gz")) {
    WARN("dataset-fashion-mnist is not installed; `make test` installs it");
    return;
  }
  const fs::path dir = fs::temp_directory_path() / ("ember-cli-cuda-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const nlohmann::json cpu = train("cpu", dir / "cpu"), gpu = train("cuda", dir / "cuda");
  CHECK(gpu["device"] == "cuda:0");
  CHECK(gpu["transfers"]["H2D"]["count"] > 0);  // the batches crossed the bus
  const double cpu_loss = cpu["epochs"][0]["train_loss"], gpu_loss = gpu["epochs"][0]["train_loss"];
  const double cpu_acc = cpu["epochs"][0]["test_accuracy"], gpu_acc = gpu["epochs"][0]["test_accuracy"];
  INFO("train loss: cpu " << cpu_loss << ", cuda " << gpu_loss << "; test accuracy: cpu " << cpu_acc << ", cuda "
                          << gpu_acc);
  // 32 steps from the same initial weights: the sums' order differs, the result hardly.
  CHECK(std::fabs(cpu_loss - gpu_loss) <= 1e-3 * cpu_loss);
  CHECK(std::fabs(cpu_acc - gpu_acc) <= 0.005);
  CHECK(gpu_acc > 0.5);
  fs::remove_all(dir);
}
