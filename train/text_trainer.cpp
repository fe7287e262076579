// The text Trainer: the corpus, the model, the held-out batches, the steps and the evaluations between them.
#include "train/text_trainer.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <ostream>

#include "core/cuda_runtime.h"
#include "models/io.h"
#include "nn/summary.h"
#include "train/checkpoint.h"
#include "train/step.h"
#include "train/text_eval.h"

namespace ember::train {

namespace {

// The training windows' key: the run's seed, moved off the stream that draws the weights and dropout masks.
constexpr uint64_t kWindowKey = 0x5445585457494e44ull;  // "TEXTWIND"

class TextTrainer {
 public:
  TextTrainer(const TrainConfig& config, std::ostream& log, dist::Communicator& comm);
  TrainResult run();

 private:
  bool leader() const { return comm_.rank() == 0; }
  bool verbose() const { return leader() && !cfg_.quiet; }
  void load_model();
  void print_header() const;
  void resolve_start(const TrainConfig& requested);
  data::Batch next_batch();
  TextMetrics train_interval(int64_t done, int64_t steps);
  MaskedEval evaluate_held_out();
  void end_interval(TextMetrics m);
  void print_summary(int64_t steps_run) const;

  dist::Communicator& comm_;
  std::ostream& log_;
  TrainConfig cfg_;
  std::optional<TrainingState> resume_;
  data::TextCorpus corpus_;
  models::Architecture arch_;
  Generator generator_;  // initial weights, then the dropout masks: lives as long as the model
  Generator windows_;    // the training windows and masks: the same on every rank
  std::shared_ptr<models::BertMaskedLM> model_;
  std::vector<data::MaskedBatch> held_out_;  // this rank's share of the fixed held-out batches, on the device
  std::unique_ptr<Stepper> stepper_;
  std::unique_ptr<StepRecord> record_;
  TrainResult result_;
  uint64_t checksum_ = 0;  // of the parameters, equal on every rank at each evaluation
};

// Stream words one training batch takes (data::make_masked_batch): a resumed run skips them for the steps done.
uint64_t words_per_batch(const TrainConfig& c) {
  return static_cast<uint64_t>(c.batch_size + 3 * c.batch_size * c.seq_len);
}

TextTrainer::TextTrainer(const TrainConfig& config, std::ostream& log, dist::Communicator& comm)
    : comm_(comm), log_(log) {
  resolve_start(config);
  generator_.manual_seed(cfg_.seed);
  windows_.set_state(cfg_.seed ^ kWindowKey, resume_ ? static_cast<uint64_t>(resume_->step) * words_per_batch(cfg_) : 0);
  corpus_ = data::load_text_corpus(cfg_.text_path);
  data::check_corpus_fits(corpus_, cfg_.seq_len);
  load_model();
  const std::vector<data::MaskedBatch> all =
      held_out_batches(corpus_, cfg_.eval_batches, cfg_.batch_size, cfg_.seq_len);
  for (size_t i = static_cast<size_t>(comm_.rank()); i < all.size(); i += static_cast<size_t>(comm_.size()))
    held_out_.push_back(all[i].to(cfg_.device));  // once, not at every evaluation
  stepper_ = resume_ ? std::make_unique<Stepper>(*model_, cfg_, comm_, cfg_.eval_every, resume_->step,
                                                &resume_->optimizer)
                     : std::make_unique<Stepper>(*model_, cfg_, comm_, cfg_.eval_every);
  stepper_->set_forward([this](const data::Batch& b) { return model_->forward(b.x, b.positions); });
  record_ = std::make_unique<StepRecord>(cfg_.eval_every, cfg_.device);
}

// The run's settings: `requested`, or on --resume the saved recipe with this invocation's settings (as the image
// trainer's), and the saved state and history.
void TextTrainer::resolve_start(const TrainConfig& requested) {
  cfg_ = requested;
  if (!requested.resume_dir.empty()) {
    const std::string state = requested.resume_dir + "/state.safetensors";
    resume_ = load_training_state(state);
    cfg_ = resumed_config(requested, resume_->config_json);
    result_.text = text_history_from_json(resume_->history_json, state);
    EMBER_CHECK(resume_->step < cfg_.steps, ValueError, "the run in ", requested.resume_dir, " already trained ",
                resume_->step, " step(s); ask for more with --steps N (N > ", resume_->step, ")");
  }
  validate(cfg_);
}

// A new model, or the one in --init's file or the resumed run's; every rank takes rank 0's weights and its own
// dropout stream.
void TextTrainer::load_model() {
  arch_ = architecture_of(cfg_);
  std::shared_ptr<nn::Module> model;
  const std::string weights = resume_ ? cfg_.resume_dir + "/model.safetensors" : cfg_.init_path;
  if (weights.empty()) {
    model = models::make_model(arch_, cfg_.device, generator_);
  } else {
    models::Network loaded = models::load_model(weights, cfg_.device, cfg_.dropout, generator_);
    check_text_model(loaded.arch, cfg_.seq_len, weights);
    if (resume_) generator_.set_state(cfg_.seed, resume_->rng_offset);  // dropout goes on where it stopped
    model = loaded.model;
    arch_ = loaded.arch;
    cfg_.dim = arch_.dim, cfg_.depth = arch_.depth, cfg_.heads = arch_.heads, cfg_.feedforward = arch_.feedforward;
  }
  model_ = std::dynamic_pointer_cast<models::BertMaskedLM>(model);
  EMBER_ASSERT(model_ != nullptr, "a bert architecture builds a BertMaskedLM");
  dist::broadcast_state(comm_, *model_);
  generator_.set_state(cfg_.seed, generator_.offset() + static_cast<uint64_t>(comm_.rank()) * kRankStreamStride);
}

void TextTrainer::print_header() const {
  if (!verbose()) return;
  log_ << "ember train: " << arch_.str() << " BERT (masked bytes) on " << cfg_.device.str() << ", " << corpus_.source
       << ": " << corpus_.bytes.size() << " bytes in " << corpus_.files.size() << " file(s), " << corpus_.train_bytes
       << " to train on, " << corpus_.held_out_bytes() << " held out; " << cfg_.steps << " steps of "
       << cfg_.batch_size << " windows of " << cfg_.seq_len << " bytes, " << cfg_.optimizer << " lr " << cfg_.lr
       << " (" << cfg_.schedule << ")" << (resume_ ? ", resuming after step " + std::to_string(resume_->step) : "")
       << "\n";
  if (comm_.size() > 1)
    log_ << "data-parallel: " << comm_.size() << " ranks over " << comm_.describe(cfg_.device) << "; batch "
         << cfg_.batch_size << " is the global batch, each rank its rows\n";
  log_ << nn::summarize(*model_, {cfg_.batch_size, cfg_.seq_len}, DType::I64).table();
}

// The global batch (the same on every rank), and this rank's contiguous rows of it on the device.
data::Batch TextTrainer::next_batch() {
  const data::MaskedBatch global =
      data::make_masked_batch(corpus_.train(), corpus_.train_bytes, cfg_.batch_size, cfg_.seq_len, windows_);
  const int64_t rows = cfg_.batch_size, r = comm_.rank(), n = comm_.size();
  const data::MaskedBatch mine = global.rows(rows * r / n, rows * (r + 1) / n).to(cfg_.device);
  data::Batch b;
  b.x = mine.ids, b.y = mine.targets, b.positions = mine.positions;
  b.global_size = global.chosen();
  return b;
}

MaskedEval TextTrainer::evaluate_held_out() {
  MaskedEval local = evaluate_masked(*model_, held_out_);
  if (comm_.size() == 1) return local;
  const std::vector<double> s = comm_.all_reduce_sum({local.loss_sum, local.correct, double(local.tokens)});
  return {s[0], s[1], static_cast<int64_t>(s[2])};
}

void TextTrainer::end_interval(TextMetrics m) {
  const MaskedEval e = evaluate_held_out();
  m.masked_accuracy = e.accuracy(), m.masked_loss = e.loss();
  result_.text.push_back(m);
  if (verbose()) log_ << text_metrics_line(m, cfg_.steps, cfg_.progress_bar) << std::flush;
  if (comm_.size() > 1)
    checksum_ = dist::check_same_parameters(comm_, *model_, detail::concat("after step ", m.step));
  if (!leader()) return;  // rank 0 alone writes the run's files
  const uint64_t rng_offset = generator_.offset() - static_cast<uint64_t>(comm_.rank()) * kRankStreamStride;
  save_checkpoint(cfg_.out_dir, *model_, arch_,
                  {stepper_->optimizer().state_dict(), 0, stepper_->steps_done(), rng_offset, cfg_.to_json(),
                   text_history_json(result_.text)});
  write_text_run_files(cfg_.out_dir, result_.text, cfg_.metrics_json, cfg_.device.str(), cfg_.to_json());
}

// `steps` steps after `done`: their training loss (the mean over their masked bytes), time and throughput.
TextMetrics TextTrainer::train_interval(int64_t done, int64_t steps) {
  const auto start = Clock::now();
  auto last_draw = start;
  const int64_t tokens_per_step = cfg_.batch_size * cfg_.seq_len;
  for (int64_t i = 0; i < steps; ++i) {
    const data::Batch batch = next_batch();
    const Stepper::Output out = stepper_->step(batch);
    record_->record(i, out.loss, out.correct, batch.global_size);
    if (cfg_.progress_bar && verbose() && seconds_since(last_draw) > 0.25) {
      last_draw = Clock::now();
      draw_text_progress(log_, done + i + 1, cfg_.steps, record_->sums(i + 1).mean_loss(),
                         double((i + 1) * tokens_per_step) / seconds_since(start));
    }
  }
  if (cfg_.device.is_cuda()) cuda::synchronize(cfg_.device);
  const double seconds = seconds_since(start);
  stepper_->watch().stop_if_flagged(steps, cfg_.lr);
  const StepRecord::Sums sums = record_->sums(steps);
  EMBER_CHECK(sums.rows > 0, NumericalError, "every step up to step ", done + steps,
              " had a non-finite loss, so none was applied. Lower --lr (now ", cfg_.lr, ")");
  return {.step = done + steps, .train_loss = sums.mean_loss(),
          .tokens_per_second = double(steps * tokens_per_step) / seconds, .seconds = seconds, .lr = stepper_->lr()};
}

void TextTrainer::print_summary(int64_t steps_run) const {
  char line[256];
  std::snprintf(line, sizeof line,
                "held-out masked accuracy %.2f%%, loss %.4f | %lld steps in %.1f s, training at %.0f tokens/s on %s\n",
                100 * result_.test_accuracy, result_.test_loss, static_cast<long long>(steps_run), result_.seconds,
                result_.samples_per_second, cfg_.device.str().c_str());
  log_ << line;
  if (comm_.size() > 1) {
    std::snprintf(line, sizeof line, "parameters identical on all %d ranks at every evaluation (checksum %016llx)\n",
                  comm_.size(), static_cast<unsigned long long>(checksum_));
    log_ << line << "gradient all-reduce (rank 0): " << stepper_->reducer().summary() << "\n";
  }
  log_ << "saved " << cfg_.out_dir
       << "/model.safetensors (ember predict --checkpoint it --text \"...[MASK]...\"; PyTorch: torch_bert.py's "
          "Bert().load_state_dict(safetensors.torch.load_file(...)))\n";
}

TrainResult TextTrainer::run() {
  if (leader()) std::filesystem::create_directories(cfg_.out_dir);
  print_header();
  model_->train();
  const auto run_start = Clock::now();
  double train_seconds = 0;
  const int64_t first = resume_ ? resume_->step : 0;
  for (int64_t done = first; done < cfg_.steps;) {
    const TextMetrics m = train_interval(done, std::min(cfg_.eval_every, cfg_.steps - done));
    done = m.step;
    train_seconds += m.seconds;
    end_interval(m);
  }
  result_.seconds = seconds_since(run_start);
  result_.samples_per_second =
      double((cfg_.steps - first) * cfg_.batch_size * cfg_.seq_len) / std::max(train_seconds, 1e-9);
  result_.test_loss = result_.text.back().masked_loss;
  result_.test_accuracy = result_.text.back().masked_accuracy;
  result_.all_reduce = stepper_->reducer().stats();
  if (verbose()) print_summary(cfg_.steps - first);
  return result_;
}

}  // namespace

TrainResult train_text_model(const TrainConfig& config, std::ostream& log, dist::Communicator& comm) {
  return TextTrainer(config, log, comm).run();
}

}  // namespace ember::train
