// TrainConfig: JSON through the one field list, the checks, the resume rule, and the objects the config names.
#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

namespace ember::train {

using json = nlohmann::json;

namespace {

// Keys that runs saved before the CNN (or the ViT) existed do not have: such a run used the defaults.
const std::set<std::string> kAddedLater = {"model",     "channels", "dropout",    "patch",        "dim",
                                           "depth",     "heads",    "feedforward", "text_path",   "steps",
                                           "seq_len",   "eval_every", "eval_batches", "warmup_fraction", "decay"};

template <typename T> json to_value(const T& v) { return v; }
json to_value(const Device& d) { return d.str(); }
template <typename T> void from_value(const json& j, T& v) { v = j.get<T>(); }
void from_value(const json& j, Device& d) { d = Device::parse(j.get<std::string>()); }

}  // namespace

std::string TrainConfig::to_json() const {
  json j = json::object();
  fields([&](const char* name, Kind kind, const auto& value) {
    if (kind != Kind::Transient) j[name] = to_value(value);
  }, *this);
  return j.dump();
}

TrainConfig TrainConfig::from_json(const std::string& text) {
  TrainConfig c;
  try {
    const json j = json::parse(text);
    fields([&](const char* name, Kind kind, auto& value) {
      if (kind == Kind::Transient || (!j.contains(name) && kAddedLater.count(name) != 0)) return;
      from_value(j.at(name), value);
    }, c);
  } catch (const json::exception& e) {
    throw FormatError(detail::concat("the saved training config is malformed: ", e.what()));
  }
  return c;
}

TrainConfig TrainConfig::defaults_for(const std::string& model) {
  TrainConfig c;
  c.model = model;
  if (model == "cnn") c.epochs = 10, c.lr = 0.05, c.weight_decay = 5e-4, c.hidden = {128};
  if (model == "vit") c.epochs = 10, c.optimizer = "adamw", c.lr = 2e-3, c.weight_decay = 0.05, c.dropout = 0.1;
  if (model == "bert") {
    c.optimizer = "adamw", c.lr = 1e-3, c.weight_decay = 0.01, c.decay = "matrices", c.dropout = 0.1;
    c.schedule = "linear", c.batch_size = 64, c.dim = 128, c.feedforward = 512;
  }
  return c;
}

TrainConfig resumed_config(const TrainConfig& requested, const std::string& saved_json) {
  TrainConfig c = TrainConfig::from_json(saved_json);
  // This invocation's settings replace the saved ones; the recipe stays the run's.
  TrainConfig::fields([](const char*, TrainConfig::Kind kind, auto& run, const auto& given) {
    if (kind != TrainConfig::Kind::Recipe) run = given;
  }, c, requested);
  if (c.out_dir.empty()) c.out_dir = c.resume_dir;  // continue in the resumed directory
  return c;
}

models::Architecture architecture_of(const TrainConfig& c) {
  models::Architecture a = c.model == "cnn"    ? models::Architecture::cnn(c.channels, c.hidden)
                           : c.model == "vit"  ? models::Architecture::vit(c.patch, c.dim, c.depth, c.heads, c.feedforward)
                           : c.model == "bert" ? models::Architecture::bert(c.seq_len, c.dim, c.depth, c.heads, c.feedforward)
                                               : models::Architecture::mlp(c.hidden);
  a.kind = c.model;
  a.dropout = c.dropout;
  return a;
}

void validate(const TrainConfig& c) {
  EMBER_CHECK(c.epochs >= 1, ValueError, "--epochs must be >= 1, got ", c.epochs);
  EMBER_CHECK(c.batch_size >= 1, ValueError, "--batch-size must be >= 1, got ", c.batch_size);
  EMBER_CHECK(c.lr > 0 && std::isfinite(c.lr), ValueError, "--lr must be a positive number, got ", c.lr);
  EMBER_CHECK(c.momentum >= 0 && c.momentum < 1, ValueError, "--momentum must be in [0, 1), got ", c.momentum);
  EMBER_CHECK(c.weight_decay >= 0, ValueError, "--weight-decay must be >= 0, got ", c.weight_decay);
  EMBER_CHECK(c.optimizer == "sgd" || c.optimizer == "adamw", ValueError, "--optimizer must be sgd or adamw, got '",
              c.optimizer, "'");
  EMBER_CHECK(c.schedule == "constant" || c.schedule == "step" || c.schedule == "cosine" || c.schedule == "linear",
              ValueError, "--schedule must be constant, step, cosine or linear, got '", c.schedule, "'");
  EMBER_CHECK(c.decay == "all" || c.decay == "matrices", ValueError, "--decay must be all or matrices, got '", c.decay,
              "'");
  EMBER_CHECK(c.steps >= 1 && c.eval_every >= 1 && c.eval_batches >= 1, ValueError,
              "--steps, --eval-every and --eval-batches must be >= 1, got ", c.steps, ", ", c.eval_every, ", ",
              c.eval_batches);
  EMBER_CHECK(c.warmup_fraction >= 0 && c.warmup_fraction <= 1, ValueError, "--warmup-fraction must be in [0, 1], got ",
              c.warmup_fraction);
  EMBER_CHECK(!c.hidden.empty(), ValueError, "--hidden needs at least one layer size, e.g. 256,128");
  architecture_of(c).check();
  EMBER_CHECK(c.limit == -1 || c.limit >= 1, ValueError, "--limit must be >= 1, got ", c.limit);
  EMBER_CHECK(c.bucket_kb >= 1, ValueError, "--bucket-kb must be >= 1, got ", c.bucket_kb);
  EMBER_CHECK(!c.nesterov || c.optimizer != "sgd" || c.momentum > 0, ValueError, "--nesterov needs --momentum > 0");
}

std::unique_ptr<optim::LrSchedule> make_schedule(const TrainConfig& c, int64_t steps_per_epoch) {
  const bool by_steps = c.model == "bert";
  const int64_t total = std::max<int64_t>(1, by_steps ? c.steps : c.epochs * steps_per_epoch);
  if (c.schedule == "constant") return std::make_unique<optim::ConstantLr>(c.lr);
  if (c.schedule == "step")
    return std::make_unique<optim::StepLr>(c.lr, std::max<int64_t>(1, c.step_epochs * steps_per_epoch), c.step_gamma);
  // The peer's rule for BERT: max(1, steps // 20) at the default 5%.
  const double warm = by_steps ? std::floor(c.warmup_fraction * double(total) + 1e-9)
                               : c.warmup_epochs * double(steps_per_epoch);
  const int64_t warmup = std::min<int64_t>(total - 1, static_cast<int64_t>(warm));
  if (c.schedule == "linear") return std::make_unique<optim::LinearLr>(c.lr, total, std::max<int64_t>(1, warmup));
  return std::make_unique<optim::CosineLr>(c.lr, total, std::max<int64_t>(0, warmup), 0.0);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, const std::vector<nn::ParameterPtr>& params) {
  if (c.optimizer == "adamw") {
    auto adamw = std::make_unique<optim::AdamW>(params, ops::AdamWOptions{.lr = c.lr, .weight_decay = c.weight_decay});
    for (size_t i = 0; i < params.size() && c.decay == "matrices"; ++i)
      if (params[i]->value.dim() < 2) adamw->set_weight_decay(i, 0);
    return adamw;
  }
  return std::make_unique<optim::SGD>(
      params,
      ops::SgdOptions{.lr = c.lr, .momentum = c.momentum, .dampening = 0, .weight_decay = c.weight_decay, .nesterov = c.nesterov});
}

}  // namespace ember::train
