// TrainConfig: every setting of a training run, declared once. Each field is listed once more, in
// TrainConfig::fields(), with what a run does with it: the recipe is saved with the run and a resumed run keeps
// its own; the invocation's settings (where, on what, how long, what to print) come from each command line.
// to_json, from_json and the resume rule all read that one list (a test checks it holds every member); `ember
// train` binds its flags to the fields.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "data/dataset.h"
#include "data/text.h"
#include "models/architecture.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace ember::train {

struct TrainConfig {
  std::string data_dir = data::default_fashion_mnist_dir();
  Device device = Device::cpu();
  int64_t epochs = 20;
  int64_t batch_size = 128;
  std::string optimizer = "sgd";   // sgd | adamw
  double lr = 0.1;
  double momentum = 0.9;
  bool nesterov = true;
  double weight_decay = 1e-4;
  std::string schedule = "cosine"; // constant | step | cosine | linear (warmup, then linear decay to 0)
  double warmup_epochs = 1;        // cosine, linear: warmup (bert: warmup_fraction of the steps instead)
  int64_t step_epochs = 5;         // step: decay every this many epochs
  double step_gamma = 0.1;
  std::string model = "mlp";       // mlp | cnn | vit | bert (models/architecture.h)
  std::vector<int64_t> hidden = {256, 128};
  std::vector<int64_t> channels = {32, 64};  // cnn: conv block widths
  double dropout = 0.25;           // cnn: after each hidden Linear; vit: in each encoder layer
  int64_t patch = 7;               // vit: patch side, width, encoder layers, heads, feed-forward width
  int64_t dim = 64;
  int64_t depth = 4;
  int64_t heads = 4;
  int64_t feedforward = 128;
  // bert: the corpus (data/text.h), steps, window, evaluation and which parameters decay.
  std::string text_path = data::default_text_path();
  int64_t steps = 2000;
  int64_t seq_len = 64;
  int64_t eval_every = 500;        // steps between evaluations on the held-out batches (and at the end)
  int64_t eval_batches = 100;      // fixed held-out batches (windows and masks from seed 1234)
  double warmup_fraction = 0.05;   // linear warmup over this share of the steps
  std::string decay = "all";       // all | matrices: AdamW's weight decay on every parameter or on 2+-d ones
  uint64_t seed = 0;
  bool shuffle = true;
  bool pin_memory = true;
  int64_t limit = -1;              // first N training samples (-1: all)
  std::string init_path;           // start from these weights
  std::string resume_dir;          // continue this run
  std::string out_dir = "runs/fashion-mnist";
  std::string metrics_json;        // also write metrics here
  bool quiet = false;
  bool progress_bar = false;       // \r progress on a terminal; plain lines otherwise
  bool skip_nonfinite = false;     // skip updates whose loss or gradients hold NaN/Inf instead of stopping
  int64_t bucket_kb = 256;         // data-parallel: gradients are summed in buckets of about this size
  bool model_given = false;        // --model was on the command line: an --init file of another kind is an error

  // What a run does with a field: Recipe is saved and a resume keeps the saved value; Invocation comes from the
  // command line every time and is saved for the record (metrics.json) too; Transient is never saved.
  enum class Kind { Recipe, Invocation, Transient };
  // Calls f(name, kind, c.field...) for every field, in the order above: with one config to read or write it,
  // with two to copy between them. Each Config is TrainConfig or const TrainConfig.
  template <typename F, typename... Config>
  static void fields(F&& f, Config&... c);

  std::string to_json() const;                            // the saved fields
  static TrainConfig from_json(const std::string& json);  // FormatError on a malformed config
  // The recipe `ember train --model mlp|cnn|vit|bert` starts from (the CNN's: docs/benchmarks.md, "CNN accuracy"; the
  // ViT's and BERT's: ../shared/peers/torch_vit.py's and torch_bert.py's).
  static TrainConfig defaults_for(const std::string& model);
};

// ValueError naming the flag, for settings no run can use.
void validate(const TrainConfig& c);
// The network the config describes.
models::Architecture architecture_of(const TrainConfig& c);
// The settings of the run: `requested`, or on --resume the saved run's recipe with this invocation's settings, so
// the continuation is the run that would have happened. `saved` is state.safetensors' config.
TrainConfig resumed_config(const TrainConfig& requested, const std::string& saved_json);
// The schedule over the run's steps: epochs * steps_per_epoch, or a bert run's --steps.
std::unique_ptr<optim::LrSchedule> make_schedule(const TrainConfig& c, int64_t steps_per_epoch);
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, const std::vector<nn::ParameterPtr>& params);

template <typename F, typename... Config>
void TrainConfig::fields(F&& f, Config&... c) {
  using K = Kind;
  f("data_dir", K::Invocation, c.data_dir...), f("device", K::Invocation, c.device...);
  f("epochs", K::Invocation, c.epochs...), f("batch_size", K::Recipe, c.batch_size...);
  f("optimizer", K::Recipe, c.optimizer...), f("lr", K::Recipe, c.lr...), f("momentum", K::Recipe, c.momentum...);
  f("nesterov", K::Recipe, c.nesterov...), f("weight_decay", K::Recipe, c.weight_decay...);
  f("schedule", K::Recipe, c.schedule...), f("warmup_epochs", K::Recipe, c.warmup_epochs...);
  f("step_epochs", K::Recipe, c.step_epochs...), f("step_gamma", K::Recipe, c.step_gamma...);
  f("model", K::Recipe, c.model...), f("hidden", K::Recipe, c.hidden...), f("channels", K::Recipe, c.channels...);
  f("dropout", K::Recipe, c.dropout...), f("patch", K::Recipe, c.patch...), f("dim", K::Recipe, c.dim...);
  f("depth", K::Recipe, c.depth...), f("heads", K::Recipe, c.heads...), f("feedforward", K::Recipe, c.feedforward...);
  f("text_path", K::Invocation, c.text_path...), f("steps", K::Invocation, c.steps...);
  f("seq_len", K::Recipe, c.seq_len...), f("eval_every", K::Invocation, c.eval_every...);
  f("eval_batches", K::Recipe, c.eval_batches...), f("warmup_fraction", K::Recipe, c.warmup_fraction...);
  f("decay", K::Recipe, c.decay...);
  f("seed", K::Recipe, c.seed...), f("shuffle", K::Recipe, c.shuffle...);
  f("pin_memory", K::Recipe, c.pin_memory...), f("limit", K::Recipe, c.limit...);
  f("init_path", K::Recipe, c.init_path...), f("skip_nonfinite", K::Recipe, c.skip_nonfinite...);
  f("resume_dir", K::Transient, c.resume_dir...), f("out_dir", K::Transient, c.out_dir...);
  f("metrics_json", K::Transient, c.metrics_json...), f("quiet", K::Transient, c.quiet...);
  f("progress_bar", K::Transient, c.progress_bar...), f("bucket_kb", K::Transient, c.bucket_kb...);
  f("model_given", K::Transient, c.model_given...);
}

}  // namespace ember::train
