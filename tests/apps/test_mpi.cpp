// `mpirun -np 2 ember train` on this machine (docs/distributed.md): the single process's losses and accuracy,
// identical parameters on every rank, resume across rank counts, and a failed or killed rank ending the run.
// Without MPI built in, ember started as one of several ranks says so and exits 2.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_ember.h"

namespace fs = std::filesystem;
using ember::test::fresh_dir;
using ember::test::have_dataset;
using ember::test::run_command;
using ember::test::run_ember;
using Run = ember::test::EmberRun;

namespace {

// The same work for every run: 6000 samples, a schedule that does not stretch with --epochs (for resume).
const std::string kRecipe = "train --device cpu --quiet --limit 6000 --seed 3 --schedule step --step-epochs 1 ";

nlohmann::json epochs_of(const fs::path& metrics) {
  std::ifstream f(metrics);
  return nlohmann::json::parse(f).at("epochs");
}

// Losses within 1e-4 (relative) and accuracies within 0.2 points, epoch by epoch: the ranks sum the same
// gradients in another order, so the runs agree to rounding, not bit for bit.
void check_same_training(const nlohmann::json& single, const nlohmann::json& ranks) {
  REQUIRE(single.size() == ranks.size());
  for (size_t e = 0; e < single.size(); ++e) {
    INFO("epoch " << e + 1);
    for (const char* key : {"train_loss", "test_loss"}) {
      const double a = single[e].at(key).get<double>(), b = ranks[e].at(key).get<double>();
      INFO(key << ": one process " << a << ", 2 ranks " << b);
      CHECK(std::abs(a - b) <= 1e-4 * std::abs(a));
    }
    for (const char* key : {"train_accuracy", "test_accuracy"}) {
      const double a = single[e].at(key).get<double>(), b = ranks[e].at(key).get<double>();
      INFO(key << ": one process " << a << ", 2 ranks " << b);
      CHECK(std::abs(a - b) <= 0.002);
    }
  }
}

#if EMBER_HAS_MPI
// mpirun from the same MPI ember was built with; root may run it here (CI's containers run as root), and
// shared memory between the ranks does without cross-memory attach (ptrace), which containers often forbid.
std::string mpirun(int ranks) {
  return std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none ") +
         EMBER_MPIEXEC + " --oversubscribe -np " + std::to_string(ranks) + " ";
}
const std::string kEmber = EMBER_BINARY;
#endif

}  // namespace

#if EMBER_HAS_MPI

TEST_CASE("mpirun -np 2 ember train: the single process's losses, identical parameters on both ranks", "[apps][mpi]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path d = fresh_dir("equal");
  REQUIRE(run_ember(kRecipe + "--threads 1 --epochs 2 --out " + (d / "one").string() + " --metrics-json " +
                    (d / "one.json").string()).code == 0);
  Run r = run_command(mpirun(2) + kEmber + " " + kRecipe + "--epochs 2 --out " + (d / "two").string() +
                      " --metrics-json " + (d / "two.json").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_same_training(epochs_of(d / "one.json"), epochs_of(d / "two.json"));
  // Rank 0 alone wrote the run; the parameter checksums of both ranks were compared after every epoch.
  CHECK(fs::exists(d / "two" / "model.safetensors"));
  Run loud = run_command(mpirun(2) + kEmber + " train --device cpu --limit 2000 --epochs 1 --bucket-kb 64 --out " + (d / "loud").string());
  INFO(loud.output);
  REQUIRE(loud.code == 0);
  CHECK_THAT(loud.output, Catch::Contains("data-parallel: 2 ranks over MPI") &&
                              Catch::Contains("parameters identical on all 2 ranks after every epoch") &&
                              Catch::Contains("gradient all-reduce (rank 0): 5 bucket(s), 0.94 MB a step"));
  fs::remove_all(d);
}

TEST_CASE("A run saved by 2 ranks resumes on 1 process, and one saved by 1 process on 2 ranks", "[apps][mpi]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path d = fresh_dir("resume");
  REQUIRE(run_ember(kRecipe + "--threads 1 --epochs 2 --out " + (d / "straight").string() + " --metrics-json " +
                    (d / "straight.json").string()).code == 0);
  // 2 ranks, then 1 process.
  Run a = run_command(mpirun(2) + kEmber + " " + kRecipe + "--epochs 1 --out " + (d / "a").string());
  INFO(a.output);
  REQUIRE(a.code == 0);
  REQUIRE(run_ember("train --device cpu --quiet --threads 1 --epochs 2 --resume " + (d / "a").string() +
                    " --metrics-json " + (d / "a.json").string()).code == 0);
  check_same_training(epochs_of(d / "straight.json"), epochs_of(d / "a.json"));
  // 1 process, then 2 ranks.
  REQUIRE(run_ember(kRecipe + "--threads 1 --epochs 1 --out " + (d / "b").string()).code == 0);
  Run b = run_command(mpirun(2) + kEmber + " train --device cpu --quiet --epochs 2 --resume " + (d / "b").string() +
                      " --metrics-json " + (d / "b.json").string());
  INFO(b.output);
  REQUIRE(b.code == 0);
  check_same_training(epochs_of(d / "straight.json"), epochs_of(d / "b.json"));
  fs::remove_all(d);
}

TEST_CASE("A diverging data-parallel run stops at the same step on every rank, naming it", "[apps][mpi]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path d = fresh_dir("nonfinite");
  auto run = [&](const std::string& launcher) {
    Run r = run_command(launcher + kEmber + " train --device cpu --limit 512 --epochs 1 --lr 1e9 --schedule constant " +
                        "--out " + (d / "run").string());
    INFO(r.output);
    CHECK(r.code == 1);
    const auto at = r.output.find("step ");
    REQUIRE(at != std::string::npos);
    return r.output.substr(at, r.output.find(':', at) - at);  // "step 2 (epoch 1, batch 2)"
  };
  // Every rank judges the global batch's loss and the summed gradients, so all flag the same step: the one a
  // single process flags.
  const std::string one = run(""), two = run(mpirun(2));
  CHECK(one == two);
  CHECK_FALSE(fs::exists(d / "run" / "model.safetensors"));
  fs::remove_all(d);
}

TEST_CASE("A rank that fails alone ends the whole run and names itself", "[apps][mpi]") {
  fs::path d = fresh_dir("fault");
  // MPMD: rank 0 is fine, rank 1 is pointed at a directory without the data set.
  const auto start = std::chrono::steady_clock::now();
  Run r = run_command(mpirun(1) + kEmber + " " + kRecipe + "--epochs 1 --out " + (d / "run").string() + " : -np 1 " +
                      kEmber + " " + kRecipe + "--epochs 1 --data " + (d / "nothing-here").string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.output);
  CHECK(r.code != 0);
  CHECK(seconds < 60);
  CHECK_THAT(r.output, Catch::Contains("ember: error on rank 1 of 2:") && Catch::Contains("nothing-here"));
  fs::remove_all(d);
}

TEST_CASE("A rank killed mid-run ends the others within a bounded time, and the last checkpoint still loads",
          "[apps][mpi]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path d = fresh_dir("kill");
  const fs::path run = d / "run";
  // Rank 1 is a shell that starts ember, waits for rank 0's first checkpoint, then kills its ember (SIGKILL).
  const std::string train = kEmber + " " + kRecipe + "--epochs 1000 --out " + run.string();
  const std::string killer = "sh -c '" + train + " & p=$!; while [ ! -f " + (run / "state.safetensors").string() +
                             " ]; do sleep 0.05; done; kill -9 $p; wait $p'";
  const auto start = std::chrono::steady_clock::now();
  Run r = run_command(mpirun(1) + train + " : -np 1 " + killer);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.output);
  CHECK(r.code != 0);
  CHECK(seconds < 120);
  CHECK_THAT(r.output, Catch::Contains("137"));  // mpirun reports rank 1's exit code: 128 + SIGKILL
  Run eval = run_ember("eval --device cpu --checkpoint " + (run / "model.safetensors").string());
  INFO(eval.output);
  CHECK(eval.code == 0);
  fs::remove_all(d);
}

TEST_CASE("mpirun -np 2 ember train --model bert: each rank its rows, the single process's losses", "[apps][mpi][bert]") {
  fs::path d = fresh_dir("bert");
  {
    std::ofstream f(d / "corpus");
    for (int i = 0; i < 2000; ++i) f << "line " << i % 37 << " of " << (i * 7) % 11 << " words\n";
  }
  // Dropout off: each rank draws its own masks, which one process would draw otherwise.
  const std::string recipe = "train --model bert --dim 16 --depth 1 --heads 2 --feedforward 32 --seq-len 16 "
                             "--batch-size 7 --steps 6 --eval-every 3 --eval-batches 3 --dropout 0 --device cpu --quiet "
                             "--text " + (d / "corpus").string() + " ";
  REQUIRE(run_ember(recipe + "--threads 1 --out " + (d / "one").string() + " --metrics-json " +
                    (d / "one.json").string()).code == 0);
  Run r = run_command(mpirun(2) + kEmber + " " + recipe + "--out " + (d / "two").string() + " --metrics-json " +
                      (d / "two.json").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::ifstream one(d / "one.json"), two(d / "two.json");
  const auto a = nlohmann::json::parse(one).at("evaluations"), b = nlohmann::json::parse(two).at("evaluations");
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* key : {"train_loss", "masked_loss", "masked_accuracy"}) {
      const double x = a[i].at(key).get<double>(), y = b[i].at(key).get<double>();
      INFO(key << " at evaluation " << i << ": one process " << x << ", 2 ranks " << y);
      CHECK(std::abs(x - y) <= 1e-4 * std::abs(x) + 1e-6);
    }
  fs::remove_all(d);
}

#else

TEST_CASE("Without MPI built in, ember started as one of 2 ranks says so and exits 2", "[apps][mpi]") {
  Run r = run_command("OMPI_COMM_WORLD_SIZE=2 " + std::string(EMBER_BINARY) + " train --epochs 1 --limit 100");
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("built without MPI") && Catch::Contains("libopenmpi-dev"));
}

#endif
