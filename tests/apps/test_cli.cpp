// End-to-end tests of the `ember` binary: a short training run on the real Fashion-MNIST, eval,
// predict, exact resume, and one clear line with the right exit code for each kind of bad input.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_ember.h"
#include "models/io.h"
#include "train/checkpoint.h"
#include "data/dataset.h"

namespace fs = std::filesystem;
using ember::test::fresh_dir;
using ember::test::have_dataset;
using ember::test::run_ember;
using ember::test::slurp;
using Run = ember::test::EmberRun;


TEST_CASE("ember train on 2000 samples writes checkpoints and metrics that eval and predict read", "[apps]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed; `make test` installs it");
    return;
  }
  fs::path dir = fresh_dir("train");
  Run r = run_ember("train --device cpu --limit 2000 --epochs 1 --out " + dir.string() + " --metrics-json " +
                (dir / "m.json").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("epoch 1/1") && Catch::Contains("test accuracy") &&
                           Catch::Contains("transfers:") && Catch::Contains("samples/s"));
  for (const char* f : {"model.safetensors", "state.safetensors", "metrics.csv", "metrics.svg", "m.json"})
    CHECK(fs::exists(dir / f));
  CHECK(slurp(dir / "metrics.svg").find("<svg") == 0);
  CHECK(slurp(dir / "metrics.csv").find("epoch,train_loss,train_accuracy,test_loss,test_accuracy") == 0);

  auto m = nlohmann::json::parse(slurp(dir / "m.json"));
  CHECK(m["device"] == "cpu");
  CHECK(m["config"]["limit"] == 2000);
  CHECK(m["transfers"]["H2D"]["count"] == 0);  // all on the host: nothing crossed the bus
  REQUIRE(m["epochs"].size() == 1);
  for (const char* key : {"epoch", "train_loss", "test_loss", "test_accuracy", "seconds", "samples_per_second"})
    CHECK(m["epochs"][0].contains(key));
  double test_accuracy = m["epochs"][0]["test_accuracy"];
  CHECK(test_accuracy > 0.35);  // one warm-up epoch on 2000 samples; chance is 0.10

  Run e = run_ember("eval --device cpu --json --checkpoint " + (dir / "model.safetensors").string());
  INFO(e.output);
  REQUIRE(e.code == 0);
  auto j = nlohmann::json::parse(e.output);
  CHECK(j["accuracy"].get<double>() == Approx(test_accuracy).margin(1e-6));
  CHECK(j["per_class"].size() == 10);
  CHECK(j["per_class"].contains("Ankle boot"));
  int64_t total = 0;
  for (const auto& row : j["confusion"])
    for (const auto& v : row) total += v.get<int64_t>();
  CHECK(total == 10000);

  Run text = run_ember("eval --device cpu --checkpoint " + (dir / "model.safetensors").string());
  CHECK(text.code == 0);
  CHECK_THAT(text.output, Catch::Contains("confusion") && Catch::Contains("T-shirt/top"));

  Run p = run_ember("predict --device cpu --index 0 --checkpoint " + (dir / "model.safetensors").string());
  INFO(p.output);
  CHECK(p.code == 0);
  CHECK_THAT(p.output, Catch::Contains("test image 0:") && Catch::Contains("true class: Ankle boot"));

  // A 28x28 PGM through predict.
  std::ofstream(dir / "img.pgm", std::ios::binary) << "P5\n# a comment\n28 28\n255\n" << std::string(784, '\x80');
  Run pg = run_ember("predict --device cpu --pgm " + (dir / "img.pgm").string() + " --checkpoint " +
                 (dir / "model.safetensors").string());
  INFO(pg.output);
  CHECK(pg.code == 0);
  std::ofstream(dir / "bad.pgm", std::ios::binary) << "P5\n27 28\n255\n" << std::string(756, 'a');
  Run bad = run_ember("predict --device cpu --pgm " + (dir / "bad.pgm").string() + " --checkpoint " +
                  (dir / "model.safetensors").string());
  CHECK(bad.code == 1);
  CHECK_THAT(bad.output, Catch::Contains("expected a 28x28 image, found 27x28"));
  fs::remove_all(dir);
}

TEST_CASE("ember train --model cnn: summary with conv shapes, eval and predict read the CNN from its checkpoint",
          "[apps]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path dir = fresh_dir("cnn");
  Run r = run_ember("train --model cnn --device cpu --threads 1 --limit 640 --epochs 1 --out " + dir.string() +
                    " --metrics-json " + (dir / "m.json").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("1x28x28-c32-c64-128-10 CNN") &&
                           Catch::Contains("model.0            Conv2d            [128, 32, 28, 28]          320") &&
                           Catch::Contains("model.1            BatchNormReLUPool [128, 32, 14, 14]           64") && Catch::Contains("[128, 64, 7, 7]") &&
                           Catch::Contains("estimated training memory"));
  const std::string model = (dir / "model.safetensors").string();
  Run e = run_ember("eval --device cpu --json --checkpoint " + model);
  INFO(e.output);
  REQUIRE(e.code == 0);
  // Eval in eval mode (running statistics) gives what the trainer measured after its epoch.
  const double trained = nlohmann::json::parse(slurp(dir / "m.json"))["epochs"][0]["test_accuracy"].get<double>();
  CHECK(nlohmann::json::parse(e.output)["accuracy"].get<double>() == Approx(trained).margin(1e-6));
  CHECK(trained > 0.15);  // five warm-up steps; chance is 0.10
  Run p = run_ember("predict --device cpu --index 0 --checkpoint " + model);
  CHECK(p.code == 0);
  CHECK_THAT(p.output, Catch::Contains("true class: Ankle boot"));
  Run text = run_ember("eval --device cpu --checkpoint " + model);
  CHECK_THAT(text.output, Catch::Contains("(1x28x28-c32-c64-128-10)"));
  // Two threads share every kernel of the CNN (convolution chunks, BatchNorm channels, pooling planes): the same bits.
  fs::path two = fresh_dir("cnn-threads2");
  Run r2 = run_ember("train --model cnn --device cpu --threads 2 --quiet --limit 640 --epochs 1 --out " + two.string());
  INFO(r2.output);
  REQUIRE(r2.code == 0);
  CHECK(slurp(two / "model.safetensors") == slurp(dir / "model.safetensors"));
  fs::remove_all(two);
  fs::remove_all(dir);
}

TEST_CASE("Resume of a CNN (dropout, BatchNorm statistics): 2 epochs straight equal 1 + 1, bit for bit", "[apps]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path a = fresh_dir("cnn-straight"), b = fresh_dir("cnn-resumed");
  const std::string common = "train --model cnn --channels 4,8 --hidden 16 --device cpu --quiet --threads 1 --limit 300 "
                             "--batch-size 100 --seed 3 --schedule step --step-epochs 1 ";
  REQUIRE(run_ember(common + "--epochs 2 --out " + a.string()).code == 0);
  REQUIRE(run_ember(common + "--epochs 1 --out " + b.string()).code == 0);
  Run r = run_ember("train --device cpu --quiet --threads 1 --epochs 2 --resume " + b.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(slurp(a / "model.safetensors") == slurp(b / "model.safetensors"));
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("Resume: 2 epochs straight equal 1 epoch + --resume + 1 epoch, bit for bit", "[apps]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path a = fresh_dir("straight"), b = fresh_dir("resumed");
  // A schedule that does not depend on the total number of epochs (a cosine one would stretch when
  // --epochs grows on resume), with Nesterov momentum and weight decay in the optimizer state.
  const std::string common =
      "train --device cpu --quiet --threads 1 --limit 1500 --batch-size 100 --seed 5 --schedule step --step-epochs 1 "
      "--step-gamma 0.5 ";
  REQUIRE(run_ember(common + "--epochs 2 --out " + a.string()).code == 0);
  REQUIRE(run_ember(common + "--epochs 1 --out " + b.string()).code == 0);
  Run r = run_ember("train --device cpu --quiet --threads 1 --epochs 2 --resume " + b.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(slurp(a / "model.safetensors") == slurp(b / "model.safetensors"));
  Run again = run_ember("train --device cpu --epochs 2 --resume " + b.string());
  CHECK(again.code == 2);
  CHECK_THAT(again.output, Catch::Contains("already trained 2 epoch(s)"));
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("ember train: --threads 1, 2 and 3 give the same weights and optimizer state, bit for bit", "[apps]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  // The default MLP and batch 128: its GEMMs are cut into tiles and its updates into chunks, so the threads
  // really share the work; 3000 samples make 24 steps, Nesterov and weight decay included. The two-thread run
  // also profiles its regions, which must change nothing but the report on stderr.
  std::vector<fs::path> dirs;
  for (int threads : {1, 2, 3}) {
    dirs.push_back(fresh_dir("threads" + std::to_string(threads)));
    Run r = run_ember("train --device cpu --quiet --limit 3000 --epochs 1 --seed 3 --threads " +
                      std::to_string(threads) + (threads == 2 ? " --profile-regions" : "") + " --out " +
                      dirs.back().string());
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK((r.output.find("region profile, 2 thread(s)") != std::string::npos) == (threads == 2));
    if (threads == 2) CHECK(r.output.find("gemm_group (") != std::string::npos);
  }
  for (size_t i = 1; i < dirs.size(); ++i) {
    INFO("--threads " << i + 1 << " vs --threads 1");
    CHECK(slurp(dirs[i] / "model.safetensors") == slurp(dirs[0] / "model.safetensors"));
    // The momentum buffers too (the state file also holds timings, which differ).
    const auto a = ember::train::load_training_state((dirs[0] / "state.safetensors").string()).optimizer.tensors;
    const auto b = ember::train::load_training_state((dirs[i] / "state.safetensors").string()).optimizer.tensors;
    REQUIRE(a.size() == b.size());
    for (size_t t = 0; t < a.size(); ++t) {
      INFO(a[t].first);
      CHECK(b[t].first == a[t].first);
      CHECK(b[t].second.to_vector<float>() == a[t].second.to_vector<float>());
    }
  }
  for (const auto& d : dirs) fs::remove_all(d);
}

TEST_CASE("Bad command lines and bad files: one clear line, exit 2 for usage and 1 for runtime errors", "[apps]") {
  fs::path dir = fresh_dir("errors");
  struct Case {
    std::string args;
    int code;
    std::string says;
  };
  std::vector<Case> cases = {
      {"", 2, "A subcommand is required"},
      {"train --epochs 0", 2, "--epochs"},
      {"train --batch-size -3", 2, "--batch-size"},
      {"train --optimizer rmsprop", 2, "--optimizer"},
      {"train --lr abc", 2, "--lr"},
      {"train --bogus-flag", 2, "bogus"},
      {"train --device gpu", 2, "invalid device string 'gpu'"},
      {"train --device cuda:x", 2, "invalid device string"},
      {"train --limit 0", 2, "--limit must be >= 1"},
      {"train --model resnet", 2, "--model"},
      {"train --model cnn --channels 8,8,8,8,8,8", 2, "halve a 28x28 image to nothing"},
      {"train --data " + (dir / "nowhere").string(), 1, "dataset-fashion-mnist"},
      {"eval --checkpoint " + (dir / "missing.safetensors").string(), 1, "missing.safetensors"},
      {"predict --checkpoint x.safetensors", 2, "exactly one of --index N"},
      {"train --resume " + dir.string(), 1, "state.safetensors"},
  };
  // A corrupt checkpoint: a header length pointing past the end of the file.
  std::ofstream(dir / "corrupt.safetensors", std::ios::binary) << std::string("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10);
  cases.push_back({"eval --device cpu --checkpoint " + (dir / "corrupt.safetensors").string(), 1, "corrupt.safetensors"});
  if (!fs::exists("/dev/nvidia0")) {
    cases.push_back({"train --device cuda --limit 100 --epochs 1 --out " + dir.string(), 1, "no usable CUDA device"});
    cases.push_back({"eval --device cuda:0 --checkpoint " + (dir / "corrupt.safetensors").string(), 1, ""});
  }
  for (const auto& c : cases) {
    INFO("ember " << c.args);
    Run r = run_ember(c.args);
    INFO(r.output);
    CHECK(r.code == c.code);
    CHECK_THAT(r.output, Catch::Contains(c.says));
    CHECK(r.output.find("Aborted") == std::string::npos);
    CHECK(r.output.find("terminate called") == std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("ember info and ember demo run on any machine", "[apps]") {
  Run info = run_ember("info");
  CHECK(info.code == 0);
  CHECK_THAT(info.output, Catch::Contains("best device:") && Catch::Contains("BLAS") &&
                              Catch::Contains("data-parallel: ") && Catch::Contains("host kernels: "));
  Run demo = run_ember("demo");
  INFO(demo.output);
  CHECK(demo.code == 0);
  CHECK_THAT(demo.output, Catch::Contains("Expected all tensors to be on the same device"));
}

TEST_CASE("A diverging run stops at the first non-finite step, naming it and what was not finite", "[apps]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path dir = fresh_dir("nonfinite");
  Run r = run_ember("train --device cpu --limit 512 --epochs 1 --lr 1e9 --schedule constant --out " + dir.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("(epoch 1, batch ") && Catch::Contains("): NaN or Inf in the loss") &&
                           Catch::Contains("its update was not applied") && Catch::Contains("Lower --lr"));
  CHECK_FALSE(fs::exists(dir / "model.safetensors"));  // nothing half-written
  fs::remove_all(dir);
}

TEST_CASE("With --skip-nonfinite the flagged steps are skipped: the model is the one of a run that ended before them",
          "[apps]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  // lr 1e9 makes the parameters huge but finite after a step or two; from then on every loss overflows.
  // A fixed order and a constant lr make the first steps of any --limit the same steps.
  const std::string common = "train --device cpu --epochs 1 --lr 1e9 --schedule constant --no-shuffle --quiet";
  fs::path stop_dir = fresh_dir("nonfinite-stop"), skip_dir = fresh_dir("nonfinite-skip"),
           short_dir = fresh_dir("nonfinite-short");
  Run stop = run_ember(common + " --limit 512 --out " + stop_dir.string());
  INFO(stop.output);
  REQUIRE(stop.code == 1);
  const size_t at = stop.output.find("error: step ");
  REQUIRE(at != std::string::npos);
  const int first_bad = std::stoi(stop.output.substr(at + 12));
  REQUIRE(first_bad >= 2);  // at least one step applied, so the comparison below means something
  REQUIRE(first_bad <= 4);

  Run skip = run_ember(common + " --limit 512 --skip-nonfinite --out " + skip_dir.string());
  INFO(skip.output);
  REQUIRE(skip.code == 0);
  Run shorter = run_ember(common + " --limit " + std::to_string((first_bad - 1) * 128) + " --out " + short_dir.string());
  INFO(shorter.output);
  REQUIRE(shorter.code == 0);

  auto skipped = ember::models::load_model((skip_dir / "model.safetensors").string());
  auto reference = ember::models::load_model((short_dir / "model.safetensors").string());
  auto a = skipped.model->named_parameters(), b = reference.model->named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    std::vector<float> x = a[i].second->value.to_vector<float>(), y = b[i].second->value.to_vector<float>();
    REQUIRE(x.size() == y.size());
    CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  }
  for (const fs::path& d : {stop_dir, skip_dir, short_dir}) fs::remove_all(d);
}
