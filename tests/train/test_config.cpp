// TrainConfig: one field list drives the saved JSON, its reading back, and the --resume rule.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <utility>

#include "nn/linear.h"
#include "train/config.h"

using namespace ember;
using train::TrainConfig;

namespace {

// The number of members of an aggregate with no aggregate members: the most values it can be brace-initialised
// with (C++ has no reflection; this is the trick Boost.PFR is built on).
struct AnyField {
  template <class T> operator T() const;
};
template <class T, class... Fields>
constexpr std::size_t member_count() {
  if constexpr (requires { T{std::declval<Fields>()..., AnyField{}}; }) return member_count<T, Fields..., AnyField>();
  else return sizeof...(Fields);
}

// Every saved field away from its default.
TrainConfig changed() {
  TrainConfig c;
  c.data_dir = "/data", c.device = Device::parse("cuda:1"), c.epochs = 7, c.batch_size = 32, c.optimizer = "adamw";
  c.lr = 0.25, c.momentum = 0.5, c.nesterov = false, c.weight_decay = 0.125, c.schedule = "step";
  c.warmup_epochs = 2, c.step_epochs = 3, c.step_gamma = 0.5, c.model = "cnn", c.hidden = {64};
  c.channels = {8, 16}, c.dropout = 0.5, c.seed = 42, c.shuffle = false, c.pin_memory = false, c.limit = 500;
  c.init_path = "w.safetensors", c.skip_nonfinite = true;
  c.patch = 4, c.dim = 32, c.depth = 2, c.heads = 8, c.feedforward = 64, c.text_path = "/text", c.steps = 9;
  c.seq_len = 12, c.eval_every = 3, c.eval_batches = 4, c.warmup_fraction = 0.5, c.decay = "matrices";
  return c;
}

}  // namespace

TEST_CASE("Every member of TrainConfig is in its one field list", "[train]") {
  std::size_t listed = 0;
  TrainConfig c;
  TrainConfig::fields([&](const char*, TrainConfig::Kind, auto&) { ++listed; }, c);
  CHECK(listed == member_count<TrainConfig>());  // a member missing from fields() would be neither saved nor resumed
}

TEST_CASE("TrainConfig round-trips every saved field through JSON, and leaves out the invocation's own", "[train]") {
  TrainConfig c = changed();
  c.out_dir = "somewhere", c.metrics_json = "m.json", c.quiet = true, c.bucket_kb = 7;
  const std::string json = c.to_json();
  const TrainConfig back = TrainConfig::from_json(json);
  CHECK(back.to_json() == json);
  CHECK(back.device.str() == "cuda:1");
  CHECK(back.channels == std::vector<int64_t>{8, 16});
  CHECK(json.find("out_dir") == std::string::npos);  // transient settings are not part of a run's record
  CHECK(json.find("bucket_kb") == std::string::npos);
  CHECK(back.out_dir == TrainConfig().out_dir);
}

TEST_CASE("A config saved before the CNN existed loads as an MLP, and a malformed one is a FormatError", "[train]") {
  std::string old = TrainConfig().to_json();
  for (const char* key : {"\"model\":\"mlp\",", "\"channels\":[32,64],", "\"dropout\":0.25,"}) {
    const size_t at = old.find(key);
    REQUIRE(at != std::string::npos);
    old.erase(at, std::string(key).size());
  }
  const TrainConfig c = TrainConfig::from_json(old);
  CHECK(c.model == "mlp");
  CHECK(c.dropout == 0.25);
  std::string no_lr = TrainConfig().to_json();
  no_lr.erase(no_lr.find("\"lr\":0.1,"), 9);
  CHECK_THROWS_AS(TrainConfig::from_json(no_lr), FormatError);
  CHECK_THROWS_WITH(TrainConfig::from_json("{not json"), Catch::Contains("the saved training config is malformed"));
}

TEST_CASE("A resumed run keeps the saved recipe and takes where, how long and what to print from the command line", "[train]") {
  const TrainConfig saved = changed();
  TrainConfig requested;  // defaults everywhere, but:
  requested.epochs = 12, requested.device = Device::cpu(), requested.data_dir = "/other";
  requested.resume_dir = "runs/a", requested.out_dir = "", requested.quiet = true, requested.bucket_kb = 9;
  const TrainConfig c = train::resumed_config(requested, saved.to_json());
  CHECK(c.lr == 0.25);  // the recipe is the run's
  CHECK(c.model == "cnn");
  CHECK(c.seed == 42);
  CHECK(c.epochs == 12);  // the invocation's
  CHECK(c.device == Device::cpu());
  CHECK(c.data_dir == "/other");
  CHECK(c.quiet);
  CHECK(c.bucket_kb == 9);
  CHECK(c.out_dir == "runs/a");  // no --out: the resumed directory
}

TEST_CASE("The CNN's recipe differs from the MLP's where docs/usage.md says", "[train]") {
  const TrainConfig mlp = TrainConfig::defaults_for("mlp"), cnn = TrainConfig::defaults_for("cnn");
  CHECK(mlp.to_json() == TrainConfig().to_json());
  CHECK(cnn.epochs == 10);
  CHECK(cnn.lr == 0.05);
  CHECK(cnn.weight_decay == 5e-4);
  CHECK(cnn.hidden == std::vector<int64_t>{128});
  CHECK(cnn.batch_size == mlp.batch_size);
}

TEST_CASE("BERT's recipe is the peer's: AdamW decaying matrices only, warmup over 5% of the steps then linear decay",
          "[train][bert]") {
  TrainConfig c = TrainConfig::defaults_for("bert");
  CHECK(c.batch_size == 64);
  CHECK(c.dim == 128);
  CHECK(c.feedforward == 512);
  CHECK(c.seq_len == 64);
  CHECK(c.steps == 2000);
  CHECK(models::Architecture(train::architecture_of(c)).str() == "t64-d128-l4-h4-f512-257");
  // torch_bert.py: LambdaLR with warm = max(1, steps // 20), (s + 1) / warm, then (steps - s) / (steps - warm).
  const auto schedule = train::make_schedule(c, 1);
  CHECK(schedule->lr_at(0) == Approx(1e-3 / 100));
  CHECK(schedule->lr_at(99) == Approx(1e-3));
  CHECK(schedule->lr_at(100) == Approx(1e-3));
  CHECK(schedule->lr_at(1050) == Approx(1e-3 * 950 / 1900));
  CHECK(schedule->lr_at(1999) == Approx(1e-3 / 1900));
  c.steps = 10;
  CHECK(train::make_schedule(c, 1)->lr_at(0) == Approx(1e-3));  // max(1, 10 // 20) = 1 warmup step
  // Zero gradients: AdamW moves a parameter only by its weight decay, which the 1-d one does not get.
  Generator generator(0);
  nn::Linear layer(3, 2, true, DType::F32, Device::cpu(), generator);
  c.steps = 2000;
  const auto optimizer = train::make_optimizer(c, layer.parameters());
  const std::vector<float> w = layer.weight()->value.to_vector<float>(), b = layer.bias()->value.to_vector<float>();
  optimizer->zero_grad();
  optimizer->set_lr(0.5);
  optimizer->step();
  CHECK(layer.bias()->value.to_vector<float>() == b);
  CHECK(layer.weight()->value.to_vector<float>()[0] == Approx(w[0] * (1 - 0.5 * 0.01)));
}
