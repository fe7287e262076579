// `ember train`: Fashion-MNIST (or, for --model bert, text) training with every knob of train::TrainConfig on the
// command line.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include "apps/commands.h"
#include "distributed/communicator.h"
#include "core/host.h"
#include "train/trainer.h"

namespace ember::apps {

namespace {

// The flags whose defaults depend on --model.
struct RecipeFlags {
  const CLI::Option *epochs, *optimizer, *lr, *weight_decay, *hidden, *dropout, *batch_size, *schedule, *dim,
      *feedforward, *decay;
};

// The model's own recipe (train::TrainConfig::defaults_for) for each of those flags not given on the command line.
void apply_model_recipe(train::TrainConfig& c, const RecipeFlags& flags) {
  const train::TrainConfig recipe = train::TrainConfig::defaults_for(c.model);
  if (flags.epochs->count() == 0) c.epochs = recipe.epochs;
  if (flags.optimizer->count() == 0) c.optimizer = recipe.optimizer;
  if (flags.dropout->count() == 0) c.dropout = recipe.dropout;
  if (flags.lr->count() == 0) c.lr = recipe.lr;
  if (flags.weight_decay->count() == 0) c.weight_decay = recipe.weight_decay;
  if (flags.hidden->count() == 0) c.hidden = recipe.hidden;
  if (flags.batch_size->count() == 0) c.batch_size = recipe.batch_size;
  if (flags.schedule->count() == 0) c.schedule = recipe.schedule;
  if (flags.dim->count() == 0) c.dim = recipe.dim;
  if (flags.feedforward->count() == 0) c.feedforward = recipe.feedforward;
  if (flags.decay->count() == 0) c.decay = recipe.decay;
}

// Under mpirun: cuda:local_rank for auto or cuda (one GPU a rank on each machine), and the cores shared
// among the ranks of this machine unless --threads says otherwise.
Device rank_device(const std::string& text, const dist::Communicator& comm) {
  if (comm.size() == 1 || (text != "auto" && text != "cuda")) return resolve_device(text);
  const Device best = text == "auto" ? Device::best() : Device::parse("cuda");
  if (!best.is_cuda()) return best;
  const int gpus = cuda::device_count();
  if (gpus == 0) return best;  // the usual "no usable CUDA device" error follows, with its reason
  EMBER_CHECK(comm.local_rank() < gpus, DeviceUnavailableError, "rank ", comm.rank(), " is local rank ",
              comm.local_rank(), " on its machine, which has only ", gpus,
              " GPU(s); start at most that many ranks a machine, or pass --device cpu");
  return Device::cuda(comm.local_rank());
}

int rank_threads(int threads, const dist::Communicator& comm) {
  if (threads != 0 || comm.size() == 1) return threads;
  const int per_rank = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) / comm.local_size();
  return std::max(1, std::min(available_cores(), per_rank));
}

// The region profile as a table, most time first: each site's regions, how evenly the threads shared their tasks
// (the calling thread's share of them), and the serial time that followed them on the calling thread.
void print_region_profile(std::FILE* out, const RegionProfile& p) {
  double parallel = 0, single = 0, between = 0;
  for (const auto& r : p.regions) (r.tasks > 1 ? parallel : single) += r.seconds, between += r.seconds_after;
  const double span = std::max(p.seconds, 1e-12);
  std::fprintf(out,
               "region profile, %d thread(s): %.3f s from the first region to the last; %.1f%% in regions of 2+ "
               "tasks, %.1f%% in single tasks, %.1f%% between regions\n",
               num_threads(), p.seconds, 100 * parallel / span, 100 * single / span, 100 * between / span);
  std::fprintf(out, "%9s %6s %8s %9s %6s %7s %9s  %s\n", "ms", "share", "calls", "us/call", "tasks", "caller",
               "after us", "site");
  for (const auto& r : p.regions) {
    const double calls = double(r.calls);
    std::fprintf(out, "%9.2f %5.1f%% %8lld %9.2f %6lld %6.0f%% %9.2f  %s", r.seconds * 1e3, 100 * r.seconds / span,
                 static_cast<long long>(r.calls), r.seconds * 1e6 / calls, static_cast<long long>(r.tasks),
                 100 * double(r.caller_tasks) / (calls * double(r.tasks)), r.seconds_after * 1e6 / calls,
                 r.site.c_str());
    if (r.work > 0) std::fprintf(out, " (%.2f MFLOP)", r.work * 1e-6);
    std::fprintf(out, "\n");
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto* sub = app.add_subcommand("train", "Train an MLP, a CNN or a Vision Transformer on Fashion-MNIST, or a "
                                          "byte-level BERT on text");
  sub->option_defaults()->always_capture_default();
  auto cfg = std::make_shared<train::TrainConfig>();
  auto device = std::make_shared<std::string>("auto");
  auto threads = std::make_shared<int>(0);
  auto no_shuffle = std::make_shared<bool>(false);
  auto no_pin = std::make_shared<bool>(false);
  auto profile = std::make_shared<bool>(false);
  cfg->out_dir = "runs/fashion-mnist";

  auto* model = sub->add_option("--model", cfg->model, "mlp (784-256-128-10), cnn (torch_cnn.py's: conv 32, conv 64, 128), vit "
                                          "(torch_vit.py's: 7x7 patches, 4 pre-norm layers of width 64, 4 heads) or bert "
                                          "(torch_bert.py's masked-byte model: 4 post-norm layers of width 128, 4 heads)")
                    ->check(CLI::IsMember({"mlp", "cnn", "vit", "bert"}));
  sub->add_option("--data", cfg->data_dir, "Directory with the Fashion-MNIST IDX files (Debian: dataset-fashion-mnist)");
  sub->add_option("--device", *device, "auto (best: cuda:0 if usable, else cpu), cpu, cuda or cuda:N");
  auto* epochs = sub->add_option("--epochs", cfg->epochs, "Total epochs (with --resume: up to this many in all; cnn default: 10)")->check(CLI::Range(1, 100000));
  auto* batch_size = sub->add_option("--batch-size", cfg->batch_size, "Samples (bert: windows) per step; under mpirun the global batch, split over the ranks (bert default: 64)")->check(CLI::Range(1, 1 << 20));
  auto* optimizer = sub->add_option("--optimizer", cfg->optimizer, "sgd or adamw (vit default: adamw)")->check(CLI::IsMember({"sgd", "adamw"}));
  auto* lr = sub->add_option("--lr", cfg->lr, "Peak learning rate (cnn default: 0.05, vit: 2e-3)")->check(CLI::PositiveNumber);
  sub->add_option("--momentum", cfg->momentum, "SGD momentum")->check(CLI::Range(0.0, 0.999999));
  sub->add_flag("--nesterov,!--no-nesterov", cfg->nesterov, "Nesterov momentum (SGD)");
  auto* weight_decay = sub->add_option("--weight-decay", cfg->weight_decay, "L2 weight decay (decoupled for AdamW; cnn default: 5e-4, vit: 0.05)")->check(CLI::NonNegativeNumber);
  auto* schedule = sub->add_option("--schedule", cfg->schedule, "constant, step, cosine or linear (warmup, then linear decay to 0; bert's default)")->check(CLI::IsMember({"constant", "step", "cosine", "linear"}));
  sub->add_option("--warmup-epochs", cfg->warmup_epochs, "Linear warmup before the cosine decay")->check(CLI::NonNegativeNumber);
  sub->add_option("--step-epochs", cfg->step_epochs, "step schedule: decay every N epochs")->check(CLI::PositiveNumber);
  sub->add_option("--step-gamma", cfg->step_gamma, "step schedule: multiply the lr by this")->check(CLI::PositiveNumber);
  auto* hidden = sub->add_option("--hidden", cfg->hidden, "Hidden Linear sizes, comma-separated (cnn: 128)")
                     ->delimiter(',')->check(CLI::PositiveNumber);
  sub->add_option("--channels", cfg->channels, "cnn: conv block widths, comma-separated")->delimiter(',')->check(CLI::PositiveNumber);
  auto* dropout = sub->add_option("--dropout", cfg->dropout, "cnn: dropout after each hidden Linear; vit: in each encoder layer (default 0.1)")->check(CLI::Range(0.0, 0.99));
  sub->add_option("--patch", cfg->patch, "vit: patch side (must divide 28)")->check(CLI::Range(1, 28));
  auto* dim = sub->add_option("--dim", cfg->dim, "vit, bert: model width (bert default: 128)")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--depth", cfg->depth, "vit, bert: encoder layers")->check(CLI::Range(1, 1024));
  sub->add_option("--heads", cfg->heads, "vit, bert: attention heads (must divide --dim)")->check(CLI::Range(1, 1 << 16));
  auto* feedforward = sub->add_option("--feedforward", cfg->feedforward, "vit, bert: feed-forward width (bert default: 512)")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--text", cfg->text_path, "bert: the corpus, a text file or a folder of them (its files without an extension, in name order); the last 5% is held out");
  sub->add_option("--steps", cfg->steps, "bert: optimizer steps")->check(CLI::Range(1, 100000000));
  sub->add_option("--seq-len", cfg->seq_len, "bert: window length in bytes (the position table)")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--eval-every", cfg->eval_every, "bert: evaluate on the held-out batches every N steps (and at the end)")->check(CLI::Range(1, 100000000));
  sub->add_option("--eval-batches", cfg->eval_batches, "bert: fixed held-out batches per evaluation")->check(CLI::Range(1, 100000));
  sub->add_option("--warmup-fraction", cfg->warmup_fraction, "bert: linear warmup over this share of the steps")->check(CLI::Range(0.0, 1.0));
  auto* decay = sub->add_option("--decay", cfg->decay, "AdamW's weight decay on all parameters or on matrices only (bert's default)")->check(CLI::IsMember({"all", "matrices"}));
  sub->add_option("--seed", cfg->seed, "Seed for initialisation and shuffling");
  sub->add_option("--threads", *threads, "Host threads for the CPU kernels (0: every core); results are the same for any count")->check(CLI::Range(0, 1024));
  sub->add_flag("--no-shuffle", *no_shuffle, "Keep the dataset order");
  sub->add_flag("--no-pin", *no_pin, "Stage batches in pageable instead of pinned memory (CUDA)");
  sub->add_option("--limit", cfg->limit, "Train on the first N samples only (-1: all)")->check(CLI::Range(int64_t(-1), int64_t(10000000)));
  sub->add_option("--init", cfg->init_path, "Start from the weights in this safetensors file");
  sub->add_option("--resume", cfg->resume_dir, "Continue the run saved in this directory");
  auto* out = sub->add_option("--out", cfg->out_dir, "Run directory: checkpoints, metrics.csv, metrics.svg (with --resume: that directory)");
  sub->add_option("--metrics-json", cfg->metrics_json, "Also write the metrics as JSON here");
  sub->add_flag("--quiet", cfg->quiet, "Print nothing but errors");
  sub->add_option("--bucket-kb", cfg->bucket_kb, "Under mpirun: sum gradients across ranks in buckets of about this many KiB, each started as soon as backward has filled it")->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  sub->add_flag("--profile-regions", *profile, "After training, print to stderr where the host thread pool's time went: each kernel's parallel regions, how evenly the threads shared them, and the serial time between them");
  sub->add_flag("--skip-nonfinite", cfg->skip_nonfinite, "Skip updates whose loss or gradients hold NaN/Inf instead of stopping");

  register_action(sub, [=] {
    train::TrainConfig c = *cfg;
    apply_model_recipe(c, {epochs, optimizer, lr, weight_decay, hidden, dropout, batch_size, schedule, dim, feedforward,
                           decay});
    c.model_given = model->count() > 0;
    dist::Communicator& comm = dist::world();
    c.device = rank_device(*device, comm);
    c.shuffle = !*no_shuffle;
    c.pin_memory = !*no_pin;
    c.progress_bar = isatty(STDOUT_FILENO) != 0;
    if (!c.resume_dir.empty() && out->count() == 0) c.out_dir.clear();  // continue in the resumed directory
    if (c.model == "bert" && c.resume_dir.empty() && out->count() == 0) c.out_dir = "runs/bert";
    set_num_threads(rank_threads(*threads, comm));
    set_region_profiling(*profile);
    train::train_model(c, std::cout);
    if (*profile) print_region_profile(stderr, region_profile());
  });
}

}  // namespace ember::apps
