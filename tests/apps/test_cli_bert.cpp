// `ember train --model bert` end to end on a small BERT and a small corpus: the run directory (metrics.csv/json,
// the checkpoint), eval equal to the run's last evaluation, predict filling [MASK]s, a resumed run equal bit for
// bit to a straight one, the same weights at 1 and 2 threads, and bad corpora, texts and checkpoints as one-line
// errors with exit code 1.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "support/run_ember.h"

namespace fs = std::filesystem;
using ember::test::fresh_dir;
using ember::test::have_dataset;
using ember::test::run_ember;
using ember::test::slurp;
using Run = ember::test::EmberRun;

namespace {

// 30 KB of lines that repeat with variations: enough for windows of 16 bytes and a held-out part.
fs::path write_corpus(const fs::path& dir) {
  const fs::path p = dir / "corpus";
  std::ofstream f(p, std::ios::binary);
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"};
  for (int i = 0; i < 1500; ++i) f << words[i % 8] << ' ' << words[(i * 3) % 8] << ' ' << i % 97 << ".\n";
  return p;
}

// metrics.csv without its timing columns (tokens_per_second, seconds): what a resumed run must reproduce exactly.
std::string without_timings(const std::string& csv) {
  std::istringstream in(csv);
  std::string out, line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string field;
    for (int i = 0; std::getline(fields, field, ','); ++i)
      if (i != 4 && i != 5) out += field + ",";
    out += "\n";
  }
  return out;
}

// A BERT small enough for a test: width 16, one layer of 2 heads, windows of 16 bytes.
std::string small(const fs::path& corpus) {
  return "train --model bert --dim 16 --depth 1 --heads 2 --feedforward 32 --seq-len 16 --batch-size 8 "
         "--eval-every 3 --eval-batches 2 --device cpu --seed 5 --text " + corpus.string() + " ";
}

}  // namespace

TEST_CASE("ember train --model bert writes its run, eval and predict read the checkpoint", "[apps][bert]") {
  const fs::path dir = fresh_dir("bert-train");
  const fs::path corpus = write_corpus(dir);
  Run r = run_ember(small(corpus) + "--threads 1 --steps 6 --out " + (dir / "run").string() + " --metrics-json " +
                    (dir / "m.json").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("t16-d16-l1-h2-f32-257 BERT (masked bytes) on cpu") &&
                           Catch::Contains("adamw lr 0.001 (linear)") && Catch::Contains("model.head.3") &&
                           Catch::Contains("step 3/6  train loss") && Catch::Contains("tokens/s"));
  const std::string csv = slurp(dir / "run" / "metrics.csv");
  CHECK(csv.rfind("step,masked_accuracy,masked_loss,train_loss,tokens_per_second,seconds,lr\n3,", 0) == 0);
  CHECK(csv.find("\n6,") != std::string::npos);
  CHECK(fs::exists(dir / "run" / "metrics.svg"));
  const auto evaluations = nlohmann::json::parse(slurp(dir / "m.json"))["evaluations"];
  REQUIRE(evaluations.size() == 2);
  const std::string model = (dir / "run" / "model.safetensors").string();
  Run e = run_ember("eval --device cpu --json --eval-batches 2 --batch-size 8 --checkpoint " + model + " --text " +
                    corpus.string());
  INFO(e.output);
  REQUIRE(e.code == 0);
  CHECK(nlohmann::json::parse(e.output)["masked_loss"].get<double>() ==
        Approx(evaluations[1]["masked_loss"].get<double>()).epsilon(1e-6));
  Run p = run_ember("predict --device cpu --checkpoint " + model + " --text \"the qu[MASK]ck br_wn\" --mask-char _ --top 3");
  INFO(p.output);
  REQUIRE(p.code == 0);
  CHECK_THAT(p.output, Catch::Contains("byte 6:") && Catch::Contains("byte 12:") && Catch::Contains("%"));
  CHECK(p.output.rfind("the qu", 0) == 0);
  fs::remove_all(dir);
}

TEST_CASE("Resume of a BERT: 6 steps straight equal 3 + 3, bit for bit, at 1 or 2 threads", "[apps][bert]") {
  const fs::path dir = fresh_dir("bert-resume");
  const fs::path corpus = write_corpus(dir);
  const std::string recipe = small(corpus) + "--quiet --schedule constant ";  // a schedule that does not stretch
  const fs::path a = dir / "straight", b = dir / "resumed", c = dir / "threads2";
  REQUIRE(run_ember(recipe + "--threads 1 --steps 6 --out " + a.string()).code == 0);
  REQUIRE(run_ember(recipe + "--threads 1 --steps 3 --out " + b.string()).code == 0);
  Run r = run_ember("train --device cpu --quiet --threads 1 --steps 6 --text " + corpus.string() + " --resume " +
                    b.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(slurp(a / "model.safetensors") == slurp(b / "model.safetensors"));
  // The same evaluations at the same steps; the timings differ (comparing the files' sizes failed when a rate
  // gained a digit).
  CHECK(without_timings(slurp(a / "metrics.csv")) == without_timings(slurp(b / "metrics.csv")));
  CHECK(without_timings(slurp(a / "metrics.csv")).find("step,masked_accuracy,masked_loss,train_loss,lr,") == 0);
  REQUIRE(run_ember(recipe + "--threads 2 --steps 6 --out " + c.string()).code == 0);
  CHECK(slurp(a / "model.safetensors") == slurp(c / "model.safetensors"));
  Run again = run_ember("train --device cpu --quiet --steps 6 --text " + corpus.string() + " --resume " + b.string());
  CHECK(again.code == 2);
  CHECK_THAT(again.output, Catch::Contains("already trained 6 step(s); ask for more with --steps N"));
  fs::remove_all(dir);
}

TEST_CASE("Bad corpora, texts and checkpoints are one-line errors with exit code 1", "[apps][bert]") {
  const fs::path dir = fresh_dir("bert-bad");
  const fs::path corpus = write_corpus(dir);
  std::ofstream(dir / "empty").close();
  std::ofstream(dir / "short") << "far too short for a window and a held-out part";
  fs::create_directory(dir / "binary");
  std::ofstream(dir / "binary" / "blob", std::ios::binary) << std::string("\0\1\2\3", 4);
  REQUIRE(run_ember(small(corpus) + "--quiet --steps 1 --out " + (dir / "run").string()).code == 0);
  const std::string model = (dir / "run" / "model.safetensors").string();
  struct Case {
    std::string args, says;
  };
  for (const Case& c :
       {Case{small(dir / "missing") + "--steps 1", "does not exist"},
        Case{small(dir / "empty") + "--steps 1", "is empty"},
        Case{small(dir / "binary") + "--steps 1", "are binary (they hold NUL bytes)"},
        Case{small(dir / "short") + "--steps 1", "each part needs more than one window of --seq-len 16 bytes"},
        Case{"train --model bert --device cpu --steps 1 --seq-len 32 --text " + corpus.string() + " --init " + model,
             "--seq-len 32 is longer than the position table of"},
        Case{"predict --device cpu --checkpoint " + model + " --text \"no mask here\"", "--text has no [MASK]"},
        Case{"predict --device cpu --checkpoint " + model + " --text \"[MASK] is a mask in a text far longer than 16\"",
             "--text is 40 bytes long but"},
        Case{"train --model mlp --device cpu --epochs 1 --limit 100 --init " + model, "holds a BERT (t16-d16-l1-h2-f32-257)"}}) {
    INFO("ember " << c.args);
    const bool train = c.args.rfind("train", 0) == 0;
    Run r = run_ember(c.args + (train ? " --out " + (dir / "out").string() : ""));
    INFO(r.output);
    CHECK(r.code == 1);
    CHECK_THAT(r.output, Catch::Contains(c.says));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
  CHECK_FALSE(fs::exists(dir / "out" / "model.safetensors"));  // nothing written half
  if (have_dataset()) {
    Run mlp = run_ember("train --device cpu --quiet --epochs 1 --limit 100 --out " + (dir / "mlp").string());
    REQUIRE(mlp.code == 0);
    Run r = run_ember(small(corpus) + "--steps 1 --init " + (dir / "mlp" / "model.safetensors").string());
    CHECK(r.code == 1);
    CHECK_THAT(r.output, Catch::Contains("holds a MLP (784-256-128-10), not a BERT"));
  }
  fs::remove_all(dir);
}
