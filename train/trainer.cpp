// train_model(): the loop of DESIGN.md's "one training step", epochs of it, evaluation and checkpoints, on
// one process or as one rank of a data-parallel run (docs/distributed.md).
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <utility>

#include "core/guard.h"
#include "core/ops.h"
#include "nn/loss.h"
#include "nn/summary.h"
#include "train/checkpoint.h"
#include "data/loader.h"
#include "distributed/ddp.h"
#include "train/trainer_support.h"

namespace ember::train {

namespace fs = std::filesystem;
using internal::json;

namespace {

// The parameters holding NaN/Inf (an update with finite gradients can still overflow them), or "".
std::string nonfinite_parameters(const nn::Module& model) {
  std::string bad;
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor v = p->value.to(Device::cpu());
    int64_t count = 0;
    for (float x : v.to_vector<float>()) count += !std::isfinite(x);
    if (count > 0) bad += detail::concat(bad.empty() ? "" : ", ", name, " (", count, " of ", v.numel(), ")");
  }
  return bad;
}

// What one step hands the guard, and the name of each entry for its messages: the loss, then each gradient.
struct Watched {
  std::vector<std::string> names;
  std::vector<nn::ParameterPtr> params;
  std::vector<Tensor> tensors;

  explicit Watched(const nn::Module& model) : names{"the loss"} {
    for (const auto& [name, p] : model.named_parameters()) {
      names.push_back(name);
      params.push_back(p);
    }
    EMBER_CHECK(names.size() <= static_cast<size_t>(kernels::kGuardMaxTensors), ValueError, "the model has ",
                params.size(), " parameter tensors; the non-finite guard watches at most ",
                kernels::kGuardMaxTensors - 1);
  }
  const std::vector<Tensor>& with_loss(const Tensor& loss) {
    tensors.clear();
    tensors.push_back(loss);
    for (const auto& p : params) tensors.push_back(p->grad);
    return tensors;
  }
  // "the loss and the gradients of 0.weight, 0.bias" for the entries a guard mask flags.
  std::string describe(uint64_t mask) const {
    std::string grads;
    for (size_t i = 1; i < names.size(); ++i)
      if (mask & kernels::guard_bit(static_cast<int>(i))) grads += (grads.empty() ? "" : ", ") + names[i];
    const bool loss = (mask & kernels::guard_bit(0)) != 0;
    if (grads.empty()) return loss ? "the loss" : "nothing";
    return (loss ? "the loss and " : "") + std::string("the gradients of ") + grads;
  }
};

// Stop mode: the guard has flagged a step, and the optimizer kernels have skipped its update and every one
// since, so the parameters are those after the step before it.
[[noreturn]] void stop_nonfinite(const NonFiniteGuard& guard, const Watched& watched, const nn::Module& model,
                                 int64_t steps_per_epoch, double lr) {
  const kernels::GuardReport r = guard.report();
  const int64_t s = r.first_step;
  const std::string params = nonfinite_parameters(model);
  throw NumericalError(detail::concat(
      "step ", s, " (epoch ", (s - 1) / steps_per_epoch + 1, ", batch ", (s - 1) % steps_per_epoch + 1,
      "): NaN or Inf in ", watched.describe(r.first_mask), "; its update was not applied",
      params.empty() ? "" : " (non-finite parameters already: " + params + ")",
      ". Lower --lr (now ", lr, ") or pass --skip-nonfinite to skip such steps"));
}


// Rank r's dropout masks come from its own stretch of the Philox stream, 2^48 words apart.
constexpr uint64_t kRankStreamStride = uint64_t{1} << 48;

// The run's settings: those given, or on --resume the saved run's, with only where and how long to train and
// where to write taken from this invocation (so the continuation is the run that would have happened).
TrainConfig resolve_config(const TrainConfig& requested, TrainingState* resume, std::vector<EpochMetrics>* history) {
  if (requested.resume_dir.empty()) {
    internal::validate(requested);
    return requested;
  }
  *resume = load_training_state(requested.resume_dir + "/state.safetensors");
  TrainConfig cfg = TrainConfig::from_json(resume->config_json);
  cfg.epochs = requested.epochs;
  cfg.device = requested.device;
  cfg.data_dir = requested.data_dir;
  cfg.out_dir = requested.out_dir.empty() ? requested.resume_dir : requested.out_dir;
  cfg.metrics_json = requested.metrics_json;
  cfg.quiet = requested.quiet;
  cfg.progress_bar = requested.progress_bar;
  cfg.resume_dir = requested.resume_dir;
  cfg.bucket_kb = requested.bucket_kb;
  try {
    for (const auto& e : json::parse(resume->history_json)) history->push_back(internal::epoch_from_json(e));
  } catch (const json::exception& e) {
    throw FormatError(detail::concat(requested.resume_dir, "/state.safetensors: the saved history is malformed: ",
                                     e.what()));
  }
  EMBER_CHECK(resume->epochs_done < cfg.epochs, ValueError, "the run in ", requested.resume_dir, " already trained ",
              resume->epochs_done, " epoch(s); ask for more with --epochs N (N > ", resume->epochs_done, ")");
  internal::validate(cfg);
  return cfg;
}

class Trainer {
 public:
  Trainer(const TrainConfig& requested, std::ostream& log, dist::Communicator& comm);
  TrainResult run();

 private:
  bool leader() const { return comm_.rank() == 0; }
  bool verbose() const { return leader() && !cfg_.quiet; }
  void build_model();
  void print_header();
  EpochMetrics train_epoch(int64_t epoch);
  void step(const data::Batch& batch);
  // Sums over the first `steps` steps of the epoch whose loss is finite: {loss * rows, correct, rows}, with the
  // global batch's loss and rows and this rank's correct count.
  std::vector<double> epoch_sums(int64_t steps);
  EvalResult evaluate_test();
  void end_epoch(const EpochMetrics& m);

  dist::Communicator& comm_;
  std::ostream& log_;
  TrainingState resume_;                // filled by resolve_config() while cfg_ is initialised: declared before it
  std::vector<EpochMetrics> history_;
  TrainConfig cfg_;
  bool resuming_;
  data::Dataset train_set_, test_set_;
  models::Architecture arch_;
  Generator generator_;  // initial weights, then the dropout masks: lives as long as the model
  std::shared_ptr<nn::Sequential> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<data::DataLoader> loader_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::unique_ptr<NonFiniteGuard> guard_;
  std::unique_ptr<Watched> watched_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  nn::CrossEntropyLoss ce_;
  int64_t step_ = 0, steps_per_epoch_ = 0;
  // Per-step loss and correct count stay on the device; the host reads them to draw progress and at the
  // epoch's end, and averages over the steps whose loss is finite (all of them unless --skip-nonfinite).
  Tensor step_loss_, step_correct_;
  std::vector<int64_t> step_rows_;  // rows of each step's global batch
  std::array<TransferStats, 3> ledger_start_{};
  TrainResult result_;
  uint64_t checksum_ = 0;  // of the parameters, equal on every rank after the last epoch
};

Trainer::Trainer(const TrainConfig& requested, std::ostream& log, dist::Communicator& comm)
    : comm_(comm), log_(log), cfg_(resolve_config(requested, &resume_, &history_)),
      resuming_(!requested.resume_dir.empty()), generator_(cfg_.seed) {
  train_set_ = data::load_fashion_mnist(cfg_.data_dir, data::Split::Train, cfg_.limit);
  test_set_ = data::load_fashion_mnist(cfg_.data_dir, data::Split::Test);
  build_model();
  optimizer_ = internal::make_optimizer(cfg_, *model_);
  if (resuming_) optimizer_->load_state_dict(resume_.optimizer);
  loader_ = std::make_unique<data::DataLoader>(
      train_set_, data::DataLoaderOptions{.batch_size = cfg_.batch_size, .shuffle = cfg_.shuffle, .seed = cfg_.seed,
                                    .drop_last = false, .device = cfg_.device, .pin_memory = cfg_.pin_memory,
                                    .shard_rank = comm_.rank(), .shard_count = comm_.size()});
  steps_per_epoch_ = loader_->batches_per_epoch();
  schedule_ = internal::make_schedule(cfg_, steps_per_epoch_);
  step_ = resuming_ ? resume_.step : 0;
  // One scan of the loss and every gradient per step, where they live; the optimizer kernels skip a
  // flagged step's update themselves, so the host never waits for the GPU to decide (docs/reliability.md).
  guard_ = std::make_unique<NonFiniteGuard>(
      cfg_.device, cfg_.skip_nonfinite ? NonFiniteGuard::Mode::Skip : NonFiniteGuard::Mode::Stop);
  optimizer_->set_guard(guard_.get());
  watched_ = std::make_unique<Watched>(*model_);
  reducer_ = std::make_unique<dist::GradientReducer>(comm_, *model_, cfg_.bucket_kb * 1024);
  step_loss_ = Tensor::empty({steps_per_epoch_}, DType::F32, cfg_.device);
  step_correct_ = Tensor::empty({steps_per_epoch_}, DType::I64, cfg_.device);
  step_rows_.assign(static_cast<size_t>(steps_per_epoch_), 0);
}

void Trainer::build_model() {
  arch_ = internal::architecture_of(cfg_);
  const std::string weights = resuming_ ? cfg_.resume_dir + "/model.safetensors" : cfg_.init_path;
  if (weights.empty()) {
    model_ = models::make_model(arch_, cfg_.device, generator_);
  } else {
    // The checkpoint's architecture wins over --model/--hidden/--channels.
    models::Network loaded = models::load_model(weights, cfg_.device, cfg_.dropout, generator_);
    if (resuming_) generator_.set_state(cfg_.seed, resume_.rng_offset);  // dropout continues where it stopped
    EMBER_CHECK(shape_numel(loaded.arch.sample_shape()) == train_set_.sample_numel() &&
                    loaded.arch.classes == data::kFashionMnistClasses,
                FormatError, weights, ": the model is ", loaded.arch.str(), " but Fashion-MNIST needs ",
                train_set_.sample_numel(), " inputs and ", data::kFashionMnistClasses, " outputs");
    model_ = loaded.model;
    arch_ = loaded.arch;
    cfg_.model = arch_.kind;
    cfg_.hidden = arch_.hidden;
    if (arch_.is_cnn()) cfg_.channels = arch_.channels;
  }
  model_->set_input_grad(false);  // the input is data: the first layer skips its dx GEMM, as PyTorch does
  dist::broadcast_state(comm_, *model_);  // every rank starts from rank 0's weights, as DDP does
  generator_.set_state(cfg_.seed, generator_.offset() + static_cast<uint64_t>(comm_.rank()) * kRankStreamStride);
}

void Trainer::print_header() {
  if (!verbose()) return;
  log_ << "ember train: " << arch_.str() << (arch_.is_cnn() ? " CNN" : " MLP") << " on " << cfg_.device.str() << ", "
       << train_set_.size() << " training / " << test_set_.size() << " test samples, batch " << cfg_.batch_size
       << ", " << cfg_.optimizer << " lr " << cfg_.lr << " (" << cfg_.schedule << ")"
       << (resuming_ ? ", resuming after epoch " + std::to_string(resume_.epochs_done) : "") << "\n";
  if (comm_.size() > 1) {
    const int64_t low = cfg_.batch_size / comm_.size(), high = (cfg_.batch_size + comm_.size() - 1) / comm_.size();
    log_ << "data-parallel: " << comm_.size() << " ranks over " << comm_.describe(cfg_.device) << "; batch "
         << cfg_.batch_size << " is the global batch ("
         << (low == high ? std::to_string(low) : std::to_string(low) + " to " + std::to_string(high)) << " a rank, rank 0 on "
         << cfg_.device.str() << ")\n";
  }
  log_ << nn::summarize(*model_, arch_.batch_shape(cfg_.batch_size)).table();
}

void Trainer::step(const data::Batch& batch) {
  optimizer_->set_lr(schedule_->lr_at(step_));
  optimizer_->zero_grad();
  Tensor loss, correct;
  if (batch.size() > 0) {
    Tensor logits = model_->forward(arch_.is_cnn() ? batch.x.view(arch_.batch_shape(batch.size())) : batch.x);
    loss = ce_.forward(logits, batch.y);
    correct = ops::count_correct(logits, batch.y);
    // This rank's share of the global batch's mean loss: the ranks' gradients then sum to the whole batch's.
    model_->backward(ce_.backward(double(batch.size()) / double(batch.global_size)));
  } else {  // a last batch smaller than the number of ranks: this rank adds zero gradients
    loss = Tensor::zeros({}, DType::F32, cfg_.device);
    correct = Tensor::zeros({}, DType::I64, cfg_.device);
  }
  reducer_->finish();
  if (comm_.size() > 1) {
    // The global batch's mean loss, the same on every rank: the guard then decides alike everywhere (a loss
    // that is Inf on one rank only would otherwise stop or skip that rank alone).
    loss = ops::scale(loss, double(batch.size()) / double(batch.global_size));
    comm_.all_reduce_sum(loss);
  }
  guard_->check(++step_, watched_->with_loss(loss));
  optimizer_->step();
  // Free to read (on CUDA it trails the device by the few steps queued ahead); exact on the CPU.
  if (!cfg_.skip_nonfinite && guard_->first_bad_step() != 0)
    stop_nonfinite(*guard_, *watched_, *model_, steps_per_epoch_, cfg_.lr);
  step_loss_.slice(0, batch.index, batch.index + 1).copy_from(loss.view({1}), true);
  step_correct_.slice(0, batch.index, batch.index + 1).copy_from(correct.view({1}), true);
  step_rows_[static_cast<size_t>(batch.index)] = batch.global_size;
}

std::vector<double> Trainer::epoch_sums(int64_t steps) {
  std::vector<float> losses = step_loss_.slice(0, 0, steps).to_vector<float>();
  std::vector<int64_t> correct = step_correct_.slice(0, 0, steps).to_vector<int64_t>();
  std::vector<double> sums(3, 0.0);
  for (int64_t i = 0; i < steps; ++i) {
    const auto rows = double(step_rows_[static_cast<size_t>(i)]);
    if (!std::isfinite(losses[i])) continue;
    sums[0] += double(losses[i]) * rows;
    sums[1] += double(correct[i]);
    sums[2] += rows;
  }
  return sums;
}

EpochMetrics Trainer::train_epoch(int64_t epoch) {
  auto epoch_start = std::chrono::steady_clock::now();
  auto last_draw = epoch_start;
  loader_->start_epoch(epoch - 1);
  const int64_t skipped_before = cfg_.skip_nonfinite ? guard_->report().count : 0;
  int64_t samples = 0;
  data::Batch batch;
  while (loader_->next(batch)) {
    step(batch);
    samples += batch.global_size;
    if (cfg_.progress_bar && verbose()) {
      auto now = std::chrono::steady_clock::now();
      if (std::chrono::duration<double>(now - last_draw).count() > 0.25) {
        last_draw = now;
        const double elapsed = std::chrono::duration<double>(now - epoch_start).count();
        const std::vector<double> s = epoch_sums(batch.index + 1);  // accuracy of rank 0's rows: no collective
        internal::draw_progress(log_, epoch, cfg_.epochs, samples, loader_->samples_per_epoch(),
                              s[2] > 0 ? s[0] / s[2] : NAN, s[2] > 0 ? s[1] / s[2] : NAN, samples / elapsed);
      }
    }
  }
  std::vector<double> sums = epoch_sums(steps_per_epoch_);
  sums[1] = comm_.all_reduce_sum(std::vector<double>{sums[1]})[0];  // the correct counts of every rank's rows
  if (cfg_.device.is_cuda()) cuda::synchronize(cfg_.device);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
  if (!cfg_.skip_nonfinite && guard_->first_bad_step() != 0)
    stop_nonfinite(*guard_, *watched_, *model_, steps_per_epoch_, cfg_.lr);
  EMBER_CHECK(sums[2] > 0, NumericalError, "every step of epoch ", epoch,
              " had a non-finite loss, so none was applied. Lower --lr (now ", cfg_.lr, ")");
  if (cfg_.skip_nonfinite && verbose()) {
    const kernels::GuardReport r = guard_->report();
    if (r.count > skipped_before)
      log_ << (cfg_.progress_bar ? "\r" : "") << "epoch " << epoch << ": skipped " << r.count - skipped_before
           << " step(s) with NaN or Inf (the latest: step " << r.last_step << "); the loss and accuracy leave out "
           << samples - static_cast<int64_t>(sums[2]) << " sample(s) whose loss was not finite\n";
  }
  EpochMetrics m;
  m.epoch = epoch;
  m.train_loss = sums[0] / sums[2];
  m.train_accuracy = sums[1] / sums[2];
  m.seconds = seconds;
  m.samples_per_second = double(samples) / seconds;
  m.lr = optimizer_->lr();
  return m;
}

// The test set split over the ranks, each evaluating its contiguous part, the sums reduced.
EvalResult Trainer::evaluate_test() {
  // BatchNorm's running statistics followed each rank's own batches: rank 0's are the model's (DDP
  // broadcasts them before every forward; once an epoch is enough for evaluation and checkpoints).
  for (auto& [name, b] : model_->named_buffers()) comm_.broadcast(b, 0);
  const data::Dataset part = test_set_.shard(comm_.rank(), comm_.size());
  EvalResult local = evaluate(*model_, part, 1000, false, data::kFashionMnistClasses, arch_.sample_shape());
  if (comm_.size() == 1) return local;
  const double n = double(local.samples);
  const std::vector<double> s = comm_.all_reduce_sum({local.loss * n, local.accuracy * n, n});
  EvalResult r;
  r.samples = static_cast<int64_t>(s[2]);
  r.loss = s[0] / s[2];
  r.accuracy = s[1] / s[2];
  return r;
}

void Trainer::end_epoch(const EpochMetrics& m) {
  history_.push_back(m);
  if (verbose()) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "%sepoch %lld/%lld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  lr %.4g  %.1f s  %.0f "
                  "samples/s\n",
                  cfg_.progress_bar ? "\r" : "", static_cast<long long>(m.epoch), static_cast<long long>(cfg_.epochs),
                  m.train_loss, 100 * m.train_accuracy, m.test_loss, 100 * m.test_accuracy, m.lr, m.seconds,
                  m.samples_per_second);
    log_ << line << std::flush;
  }
  if (comm_.size() > 1) checksum_ = dist::check_same_parameters(comm_, *model_, detail::concat("after epoch ", m.epoch));
  result_.transfers = internal::ledger_since(ledger_start_);
  if (!leader()) return;  // rank 0 alone writes the run's files
  // A checkpoint after every epoch, each file written atomically.
  json hist = json::array();
  for (const auto& h : history_) hist.push_back(internal::epoch_json(h));
  const uint64_t rng_offset = generator_.offset() - static_cast<uint64_t>(comm_.rank()) * kRankStreamStride;
  models::save_model(cfg_.out_dir + "/model.safetensors", *model_, arch_);
  save_training_state(cfg_.out_dir + "/state.safetensors",
                      {optimizer_->state_dict(), m.epoch, step_, rng_offset, cfg_.to_json(), hist.dump()});
  internal::write_run_files(cfg_.out_dir, cfg_, history_, result_.transfers);
}

TrainResult Trainer::run() {
  if (leader()) fs::create_directories(cfg_.out_dir);
  print_header();
  ledger_start_ = internal::ledger_now();
  model_->train();
  const auto run_start = std::chrono::steady_clock::now();
  double samples_trained = 0, train_seconds = 0;
  const int64_t first_epoch = resuming_ ? resume_.epochs_done + 1 : 1;
  for (int64_t epoch = first_epoch; epoch <= cfg_.epochs; ++epoch) {
    EpochMetrics m = train_epoch(epoch);
    samples_trained += m.samples_per_second * m.seconds;
    train_seconds += m.seconds;
    const EvalResult test = evaluate_test();
    m.test_loss = test.loss;
    m.test_accuracy = test.accuracy;
    end_epoch(m);
  }
  result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  result_.samples_per_second = train_seconds > 0 ? samples_trained / train_seconds : 0;
  result_.epochs = history_;
  result_.test_loss = history_.back().test_loss;
  result_.test_accuracy = history_.back().test_accuracy;
  result_.all_reduce = reducer_->stats();
  if (verbose()) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "test accuracy %.2f%%, loss %.4f | %lld epoch(s) in %.1f s, training at %.0f samples/s on %s\n",
                  100 * result_.test_accuracy, result_.test_loss, static_cast<long long>(cfg_.epochs - first_epoch + 1),
                  result_.seconds, result_.samples_per_second, cfg_.device.str().c_str());
    log_ << line << "transfers: " << TransferLedger::global().summary();
    if (comm_.size() > 1) {
      std::snprintf(line, sizeof line, "parameters identical on all %d ranks after every epoch (checksum %016llx)\n",
                    comm_.size(), static_cast<unsigned long long>(checksum_));
      log_ << line << "gradient all-reduce (rank 0): " << reducer_->summary() << "\n";
    }
    log_ << "saved " << cfg_.out_dir
         << "/model.safetensors (PyTorch: model.load_state_dict(safetensors.torch.load_file(...)))\n";
  }
  return result_;
}

}  // namespace

EvalResult evaluate(nn::Module& model, const data::Dataset& data, int64_t batch_size, bool confusion, int64_t num_classes,
                    const Shape& sample_shape) {
  bool was_training = model.is_training();
  model.eval();
  Device device = model.device();
  data::DataLoader loader(data, {.batch_size = batch_size, .shuffle = false, .seed = 0, .drop_last = false, .device = device});
  Tensor loss_sum = Tensor::zeros({}, DType::F32, device), correct = Tensor::zeros({}, DType::F32, device);
  EvalResult r;
  if (confusion) r.confusion.assign(num_classes, std::vector<int64_t>(num_classes, 0));
  const int64_t* labels = data.labels.data<int64_t>();
  nn::CrossEntropyLoss ce;
  data::Batch batch;
  int64_t seen = 0;
  while (loader.next(batch)) {
    Shape shape{batch.size()};
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
    Tensor logits = model.forward(sample_shape.empty() ? batch.x : batch.x.view(shape));
    ops::add_(loss_sum, ce.forward(logits, batch.y), static_cast<double>(batch.size()));
    ops::add_(correct, ops::cast(ops::count_correct(logits, batch.y), DType::F32));
    if (confusion) {
      std::vector<int64_t> predicted = ops::argmax(logits).to_vector<int64_t>();
      for (int64_t i = 0; i < batch.size(); ++i) r.confusion[labels[seen + i]][predicted[i]]++;
    }
    seen += batch.size();
  }
  r.samples = seen;
  r.loss = seen > 0 ? loss_sum.item<float>() / double(seen) : 0;
  r.accuracy = seen > 0 ? correct.item<float>() / double(seen) : 0;
  if (confusion) {
    for (int64_t c = 0; c < num_classes; ++c) {
      int64_t total = 0;
      for (int64_t v : r.confusion[c]) total += v;
      r.per_class_accuracy.push_back(total > 0 ? double(r.confusion[c][c]) / double(total) : 0);
    }
  }
  model.train(was_training);
  return r;
}


TrainResult train_model(const TrainConfig& config, std::ostream& log, dist::Communicator& comm) {
  return Trainer(config, log, comm).run();
}

TrainResult train_model(const TrainConfig& config, std::ostream& log) { return train_model(config, log, dist::world()); }

}  // namespace ember::train
