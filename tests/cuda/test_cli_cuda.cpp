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
#include "data/dataset.h"

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
  if (!fs::exists(fs::path(ember::data::default_fashion_mnist_dir()) / "train-images-idx3-ubyte.gz")) {
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

#if EMBER_HAS_MPI
TEST_CASE("mpirun -np 2 ember train --device cuda:0: device gradients summed over MPI train like one process",
          "[cuda][apps][mpi]") {
  if (!fs::exists(fs::path(ember::data::default_fashion_mnist_dir()) / "train-images-idx3-ubyte.gz")) {
    WARN("dataset-fashion-mnist is not installed; `make test` installs it");
    return;
  }
  const fs::path dir = fs::temp_directory_path() / ("ember-cli-cuda-mpi-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const nlohmann::json one = train("cuda:0", dir / "one");
  // Both ranks on cuda:0 (one GPU here, or the emulated device): NCCL refuses two ranks on one GPU, so the
  // buckets take the staged path, device -> pinned host -> MPI -> device, which the ledger counts.
  // LeakSanitizer would read OpenMPI's own allocations at exit as leaks.
  const std::string mpirun = std::string("ASAN_OPTIONS=detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 ") +
                             "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none " + EMBER_MPIEXEC + " --oversubscribe -np 2 " +
                             EMBER_BINARY + " train --device cuda:0 --limit 4096 --epochs 1 --seed 3 --out " +
                             (dir / "two").string() + " --metrics-json " + (dir / "two.json").string();
  const ember::test::EmberRun r = ember::test::run_command(mpirun);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("device tensors") && Catch::Contains("parameters identical on all 2 ranks"));
  std::ifstream f(dir / "two.json");
  const nlohmann::json two = nlohmann::json::parse(f);
  const double a = one["epochs"][0]["train_loss"], b = two["epochs"][0]["train_loss"];
  const double acc_a = one["epochs"][0]["test_accuracy"], acc_b = two["epochs"][0]["test_accuracy"];
  INFO("train loss: one process " << a << ", 2 ranks " << b << "; test accuracy " << acc_a << ", " << acc_b);
  CHECK(std::fabs(a - b) <= 1e-4 * a);
  CHECK(std::fabs(acc_a - acc_b) <= 0.002);
  // 32 steps of 3 buckets (256 KiB each at most) went down to the host and back on rank 0.
  const int64_t extra = two["transfers"]["D2H"]["count"].get<int64_t>() - one["transfers"]["D2H"]["count"].get<int64_t>();
  CHECK(extra >= 32 * 3);
  fs::remove_all(dir);
}
#endif
