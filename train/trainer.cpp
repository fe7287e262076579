// The Trainer: a run's set-up (data, model, loader, stepper), its epochs, the evaluation after each, and what
// it reports and writes; on one process or as one rank of a data-parallel run.
#include "train/trainer.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <ostream>

#include "core/cuda_runtime.h"
#include "data/loader.h"
#include "models/io.h"
#include "nn/summary.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/step.h"
#include "train/text_trainer.h"

namespace ember::train {

namespace {

// Where a run starts: the configuration, and on --resume the saved state and history.
struct Start {
  TrainConfig config;
  std::optional<TrainingState> resume;
  std::vector<EpochMetrics> history;
};

Start resolve_start(const TrainConfig& requested) {
  Start s;
  if (requested.resume_dir.empty()) {
    s.config = requested;
  } else {
    const std::string state = requested.resume_dir + "/state.safetensors";
    s.resume = load_training_state(state);
    s.config = resumed_config(requested, s.resume->config_json);
    s.history = history_from_json(s.resume->history_json, state);
    EMBER_CHECK(s.resume->epochs_done < s.config.epochs, ValueError, "the run in ", requested.resume_dir,
                " already trained ", s.resume->epochs_done, " epoch(s); ask for more with --epochs N (N > ",
                s.resume->epochs_done, ")");
  }
  validate(s.config);
  return s;
}

class Trainer {
 public:
  Trainer(const TrainConfig& requested, std::ostream& log, dist::Communicator& comm);
  TrainResult run();

 private:
  bool leader() const { return comm_.rank() == 0; }
  bool verbose() const { return leader() && !cfg_.quiet; }
  void load_model();
  void print_header() const;
  EpochMetrics train_epoch(int64_t epoch);
  EvalResult evaluate_test();
  void end_epoch(const EpochMetrics& m);
  void print_summary(int64_t epochs_run) const;

  dist::Communicator& comm_;
  std::ostream& log_;
  Start start_;
  const TrainConfig& cfg_ = start_.config;
  data::Dataset train_set_, test_set_;
  models::Architecture arch_;
  Generator generator_;  // initial weights, then the dropout masks: lives as long as the model
  std::shared_ptr<nn::Module> model_;
  std::unique_ptr<data::DataLoader> loader_;
  std::unique_ptr<Stepper> stepper_;
  std::unique_ptr<StepRecord> record_;
  LedgerCounts ledger_start_{};
  TrainResult result_;
  uint64_t checksum_ = 0;  // of the parameters, equal on every rank after the last epoch
};

Trainer::Trainer(const TrainConfig& requested, std::ostream& log, dist::Communicator& comm)
    : comm_(comm), log_(log), start_(resolve_start(requested)), generator_(cfg_.seed) {
  train_set_ = data::load_fashion_mnist(cfg_.data_dir, data::Split::Train, cfg_.limit);
  test_set_ = data::load_fashion_mnist(cfg_.data_dir, data::Split::Test);
  load_model();
  loader_ = std::make_unique<data::DataLoader>(
      train_set_, data::DataLoaderOptions{.batch_size = cfg_.batch_size, .shuffle = cfg_.shuffle, .seed = cfg_.seed,
                                          .drop_last = false, .device = cfg_.device, .pin_memory = cfg_.pin_memory,
                                          .sample_shape = arch_.sample_shape(), .shard_rank = comm_.rank(),
                                          .shard_count = comm_.size()});
  const int64_t steps_per_epoch = loader_->batches_per_epoch();
  stepper_ = start_.resume ? std::make_unique<Stepper>(*model_, cfg_, comm_, steps_per_epoch, start_.resume->step,
                                                       &start_.resume->optimizer)
                           : std::make_unique<Stepper>(*model_, cfg_, comm_, steps_per_epoch);
  record_ = std::make_unique<StepRecord>(steps_per_epoch, cfg_.device);
}

// A new model, or the one in --init's file or the resumed run's (whose architecture wins over the flags); then
// every rank takes rank 0's weights, as DDP does, and its own stretch of the dropout stream.
void Trainer::load_model() {
  arch_ = architecture_of(cfg_);
  const std::string weights = start_.resume ? cfg_.resume_dir + "/model.safetensors" : cfg_.init_path;
  if (weights.empty()) {
    model_ = models::make_model(arch_, cfg_.device, generator_);
  } else {
    models::Network loaded = models::load_model(weights, cfg_.device, cfg_.dropout, generator_);
    if (start_.resume) generator_.set_state(cfg_.seed, start_.resume->rng_offset);  // dropout goes on where it stopped
    check_model_fits(loaded.arch, train_set_, weights);
    EMBER_CHECK(start_.resume || !cfg_.model_given || loaded.arch.kind == cfg_.model, FormatError, "--init ", weights,
                " holds a ", loaded.arch.family(), " (", loaded.arch.str(), ") but --model is ", cfg_.model,
                "; pass --model ", loaded.arch.kind, " or the checkpoint of a ", cfg_.model);
    model_ = loaded.model;
    arch_ = loaded.arch;
    start_.config.model = arch_.kind;
    start_.config.hidden = arch_.hidden;
    if (arch_.is_cnn()) start_.config.channels = arch_.channels;
    if (arch_.is_vit()) {
      start_.config.patch = arch_.patch, start_.config.dim = arch_.dim, start_.config.depth = arch_.depth;
      start_.config.heads = arch_.heads, start_.config.feedforward = arch_.feedforward;
    }
  }
  model_->set_input_grad(false);  // the input is data: the first layer skips its dx GEMM, as PyTorch does
  dist::broadcast_state(comm_, *model_);
  generator_.set_state(cfg_.seed, generator_.offset() + static_cast<uint64_t>(comm_.rank()) * kRankStreamStride);
}

void Trainer::print_header() const {
  if (!verbose()) return;
  log_ << "ember train: " << arch_.str() << " " << arch_.family() << " on " << cfg_.device.str() << ", "
       << train_set_.size() << " training / " << test_set_.size() << " test samples, batch " << cfg_.batch_size
       << ", " << cfg_.optimizer << " lr " << cfg_.lr << " (" << cfg_.schedule << ")"
       << (start_.resume ? ", resuming after epoch " + std::to_string(start_.resume->epochs_done) : "") << "\n";
  if (comm_.size() > 1) {
    const int64_t low = cfg_.batch_size / comm_.size(), high = (cfg_.batch_size + comm_.size() - 1) / comm_.size();
    log_ << "data-parallel: " << comm_.size() << " ranks over " << comm_.describe(cfg_.device) << "; batch "
         << cfg_.batch_size << " is the global batch ("
         << (low == high ? std::to_string(low) : std::to_string(low) + " to " + std::to_string(high)) << " a rank, rank 0 on "
         << cfg_.device.str() << ")\n";
  }
  log_ << nn::summarize(*model_, arch_.batch_shape(cfg_.batch_size)).table();
}

EpochMetrics Trainer::train_epoch(int64_t epoch) {
  const auto start = Clock::now();
  auto last_draw = start;
  loader_->start_epoch(epoch - 1);
  const int64_t skipped_before = cfg_.skip_nonfinite ? stepper_->watch().report().count : 0;
  int64_t samples = 0;
  data::Batch batch;
  while (loader_->next(batch)) {
    const Stepper::Output out = stepper_->step(batch);
    record_->record(batch.index, out.loss, out.correct, batch.global_size);
    samples += batch.global_size;
    if (cfg_.progress_bar && verbose() && seconds_since(last_draw) > 0.25) {
      last_draw = Clock::now();
      const StepRecord::Sums s = record_->sums(batch.index + 1);  // accuracy of rank 0's rows: no collective
      draw_progress(log_, epoch, cfg_.epochs, samples, loader_->samples_per_epoch(), s.rows > 0 ? s.mean_loss() : NAN,
                    s.rows > 0 ? s.accuracy() : NAN, double(samples) / seconds_since(start));
    }
  }
  StepRecord::Sums sums = record_->sums(loader_->batches_per_epoch());
  sums.correct = comm_.all_reduce_sum(std::vector<double>{sums.correct})[0];  // every rank's rows
  if (cfg_.device.is_cuda()) cuda::synchronize(cfg_.device);
  const double seconds = seconds_since(start);
  stepper_->watch().stop_if_flagged(loader_->batches_per_epoch(), cfg_.lr);
  EMBER_CHECK(sums.rows > 0, NumericalError, "every step of epoch ", epoch,
              " had a non-finite loss, so none was applied. Lower --lr (now ", cfg_.lr, ")");
  const GuardReport r = cfg_.skip_nonfinite && verbose() ? stepper_->watch().report() : GuardReport{};
  if (r.count > skipped_before)
    log_ << (cfg_.progress_bar ? "\r" : "") << "epoch " << epoch << ": skipped " << r.count - skipped_before
         << " step(s) with NaN or Inf (the latest: step " << r.last_step << "); the loss and accuracy leave out "
         << samples - static_cast<int64_t>(sums.rows) << " sample(s) whose loss was not finite\n";
  return {.epoch = epoch, .train_loss = sums.mean_loss(), .train_accuracy = sums.accuracy(), .seconds = seconds,
          .samples_per_second = double(samples) / seconds, .lr = stepper_->lr()};
}

// The test set split over the ranks, each evaluating its contiguous part, the sums reduced.
EvalResult Trainer::evaluate_test() {
  // BatchNorm's running statistics followed each rank's own batches: rank 0's are the model's (DDP
  // broadcasts them before every forward; once an epoch is enough for evaluation and checkpoints).
  for (auto& [name, b] : model_->named_buffers()) comm_.broadcast(b, 0);
  const data::Dataset part = test_set_.shard(comm_.rank(), comm_.size());
  EvalResult local = evaluate(*model_, arch_, part, kEvalBatch, false);
  if (comm_.size() == 1) return local;
  const double n = double(local.samples);
  const std::vector<double> s = comm_.all_reduce_sum({local.loss * n, local.accuracy * n, n});
  EvalResult r;
  r.loss = s[0] / s[2];
  r.accuracy = s[1] / s[2];
  r.samples = static_cast<int64_t>(s[2]);
  return r;
}

void Trainer::end_epoch(const EpochMetrics& m) {
  start_.history.push_back(m);
  if (verbose()) log_ << epoch_line(m, cfg_.epochs, cfg_.progress_bar) << std::flush;
  if (comm_.size() > 1)
    checksum_ = dist::check_same_parameters(comm_, *model_, detail::concat("after epoch ", m.epoch));
  result_.transfers = ledger_since(ledger_start_);
  if (!leader()) return;  // rank 0 alone writes the run's files
  const uint64_t rng_offset = generator_.offset() - static_cast<uint64_t>(comm_.rank()) * kRankStreamStride;
  save_checkpoint(cfg_.out_dir, *model_, arch_,
                  {stepper_->optimizer().state_dict(), m.epoch, stepper_->steps_done(), rng_offset, cfg_.to_json(),
                   history_json(start_.history)});
  write_run_files(cfg_.out_dir, start_.history, cfg_.metrics_json, cfg_.device.str(), cfg_.to_json(),
                  result_.transfers);
}

void Trainer::print_summary(int64_t epochs_run) const {
  char line[256];
  std::snprintf(line, sizeof line,
                "test accuracy %.2f%%, loss %.4f | %lld epoch(s) in %.1f s, training at %.0f samples/s on %s\n",
                100 * result_.test_accuracy, result_.test_loss, static_cast<long long>(epochs_run), result_.seconds,
                result_.samples_per_second, cfg_.device.str().c_str());
  log_ << line << "transfers: " << TransferLedger::global().summary();
  if (comm_.size() > 1) {
    std::snprintf(line, sizeof line, "parameters identical on all %d ranks after every epoch (checksum %016llx)\n",
                  comm_.size(), static_cast<unsigned long long>(checksum_));
    log_ << line << "gradient all-reduce (rank 0): " << stepper_->reducer().summary() << "\n";
  }
  log_ << "saved " << cfg_.out_dir
       << "/model.safetensors (PyTorch: model.load_state_dict(safetensors.torch.load_file(...)))\n";
}

TrainResult Trainer::run() {
  if (leader()) std::filesystem::create_directories(cfg_.out_dir);
  print_header();
  ledger_start_ = ledger_now();
  model_->train();
  const auto run_start = Clock::now();
  double samples_trained = 0, train_seconds = 0;
  const int64_t first_epoch = start_.resume ? start_.resume->epochs_done + 1 : 1;
  for (int64_t epoch = first_epoch; epoch <= cfg_.epochs; ++epoch) {
    EpochMetrics m = train_epoch(epoch);
    samples_trained += m.samples_per_second * m.seconds;
    train_seconds += m.seconds;
    const EvalResult test = evaluate_test();
    m.test_loss = test.loss;
    m.test_accuracy = test.accuracy;
    end_epoch(m);
  }
  result_.seconds = seconds_since(run_start);
  result_.samples_per_second = train_seconds > 0 ? samples_trained / train_seconds : 0;
  result_.epochs = start_.history;
  result_.test_loss = start_.history.back().test_loss;
  result_.test_accuracy = start_.history.back().test_accuracy;
  result_.all_reduce = stepper_->reducer().stats();
  if (verbose()) print_summary(cfg_.epochs - first_epoch + 1);
  return result_;
}

}  // namespace

TrainResult train_model(const TrainConfig& config, std::ostream& log, dist::Communicator& comm) {
  // A resumed run is the kind it was (the command line's --model may be left out).
  const bool text = config.resume_dir.empty()
                        ? config.model == "bert"
                        : TrainConfig::from_json(load_training_state(config.resume_dir + "/state.safetensors").config_json)
                                  .model == "bert";
  if (text) return train_text_model(config, log, comm);
  return Trainer(config, log, comm).run();
}

TrainResult train_model(const TrainConfig& config, std::ostream& log) { return train_model(config, log, dist::world()); }

}  // namespace ember::train
