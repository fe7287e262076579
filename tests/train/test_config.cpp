// TrainConfig: one field list drives the saved JSON, its reading back, and the --resume rule.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <utility>

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
