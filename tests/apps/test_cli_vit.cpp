// `ember train --model vit` end to end on a small ViT: summary, eval and predict from its checkpoint, a resumed run
// equal bit for bit to a straight one (AdamW state, dropout in every layer and on the attention weights), the same
// weights at 1 and 2 threads, and the ViT's bad flags and mismatched checkpoints as one-line errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_ember.h"

namespace fs = std::filesystem;
using ember::test::fresh_dir;
using ember::test::have_dataset;
using ember::test::run_ember;
using ember::test::slurp;
using Run = ember::test::EmberRun;

namespace {

// A ViT small enough for a test: width 16, one layer of 2 heads, on a few hundred images.
const std::string kSmall = "train --model vit --dim 16 --depth 1 --heads 2 --feedforward 32 --device cpu --quiet "
                           "--limit 300 --batch-size 100 --seed 7 --schedule step --step-epochs 1 ";

}  // namespace

TEST_CASE("ember train --model vit: eval and predict read the ViT from its checkpoint", "[apps][vit]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path dir = fresh_dir("vit-train");
  Run r = run_ember("train --model vit --dim 16 --depth 1 --heads 2 --feedforward 32 --device cpu --threads 1 "
                    "--limit 1024 --warmup-epochs 0 --epochs 1 --out " + dir.string() + " --metrics-json " + (dir / "m.json").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("1x28x28-p7-d16-l1-h2-f32-10 ViT") && Catch::Contains("adamw lr 0.002") &&
                           Catch::Contains("model.patch_embed") && Catch::Contains("[128, 16, 16]"));
  const std::string model = (dir / "model.safetensors").string();
  Run e = run_ember("eval --device cpu --json --checkpoint " + model);
  INFO(e.output);
  REQUIRE(e.code == 0);
  const double trained = nlohmann::json::parse(slurp(dir / "m.json"))["epochs"][0]["test_accuracy"].get<double>();
  CHECK(nlohmann::json::parse(e.output)["accuracy"].get<double>() == Approx(trained).margin(1e-6));
  CHECK(trained > 0.15);
  Run p = run_ember("predict --device cpu --index 0 --checkpoint " + model);
  CHECK(p.code == 0);
  CHECK_THAT(p.output, Catch::Contains("true class: Ankle boot"));
  // The file says what it holds: a ViT checkpoint given to another model is refused, and the reverse.
  Run mismatch = run_ember("train --model mlp --device cpu --epochs 1 --limit 100 --init " + model + " --out " +
                           (dir / "other").string());
  CHECK(mismatch.code == 1);
  CHECK_THAT(mismatch.output, Catch::Contains("holds a ViT (1x28x28-p7-d16-l1-h2-f32-10) but --model is mlp"));
  fs::remove_all(dir);
}

TEST_CASE("Resume of a ViT: 2 epochs straight equal 1 + 1, bit for bit, at 1 or 2 threads", "[apps][vit]") {
  if (!have_dataset()) {
    WARN("dataset-fashion-mnist is not installed");
    return;
  }
  fs::path a = fresh_dir("vit-straight"), b = fresh_dir("vit-resumed"), c = fresh_dir("vit-threads2");
  REQUIRE(run_ember(kSmall + "--threads 1 --epochs 2 --out " + a.string()).code == 0);
  REQUIRE(run_ember(kSmall + "--threads 1 --epochs 1 --out " + b.string()).code == 0);
  Run r = run_ember("train --device cpu --quiet --threads 1 --epochs 2 --resume " + b.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(slurp(a / "model.safetensors") == slurp(b / "model.safetensors"));
  REQUIRE(run_ember(kSmall + "--threads 2 --epochs 2 --out " + c.string()).code == 0);
  CHECK(slurp(a / "model.safetensors") == slurp(c / "model.safetensors"));
  for (const auto& d : {a, b, c}) fs::remove_all(d);
}

TEST_CASE("The ViT's bad flags are one-line usage errors", "[apps][vit]") {
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{"train --model vit --patch 5", "--patch 5 does not divide the 28x28 image"},
                        Case{"train --model vit --heads 5", "--dim 64 is not divisible by --heads 5"},
                        Case{"train --model vit --depth 0", "--depth"}}) {
    INFO("ember " << c.args);
    Run r = run_ember(c.args);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.says));
    CHECK(r.output.find("Aborted") == std::string::npos);
  }
}
