// train_model(): the loop of DESIGN.md's "one training step", epochs of it, evaluation and checkpoints.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <utility>

#include "core/guard.h"
#include "core/ops.h"
#include "nn/loss.h"
#include "nn/summary.h"
#include "train/checkpoint.h"
#include "train/data_loader.h"
#include "train/models.h"
#include "train/svg.h"

namespace ember::train {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- config <-> JSON ----------------------------------------------------------------------------------

std::string TrainConfig::to_json() const {
  json j{{"data_dir", data_dir},         {"device", device.str()},    {"epochs", epochs},
         {"batch_size", batch_size},     {"optimizer", optimizer},    {"lr", lr},
         {"momentum", momentum},         {"nesterov", nesterov},      {"weight_decay", weight_decay},
         {"schedule", schedule},         {"warmup_epochs", warmup_epochs}, {"step_epochs", step_epochs},
         {"step_gamma", step_gamma},     {"model", model},            {"hidden", hidden},
         {"channels", channels},         {"dropout", dropout},        {"seed", seed},
         {"shuffle", shuffle},           {"pin_memory", pin_memory},  {"limit", limit},
         {"init_path", init_path},       {"skip_nonfinite", skip_nonfinite}};
  return j.dump();
}

TrainConfig TrainConfig::from_json(const std::string& text) {
  TrainConfig c;
  try {
    json j = json::parse(text);
    c.data_dir = j.at("data_dir").get<std::string>();
    c.device = Device::parse(j.at("device").get<std::string>());
    c.epochs = j.at("epochs").get<int64_t>();
    c.batch_size = j.at("batch_size").get<int64_t>();
    c.optimizer = j.at("optimizer").get<std::string>();
    c.lr = j.at("lr").get<double>();
    c.momentum = j.at("momentum").get<double>();
    c.nesterov = j.at("nesterov").get<bool>();
    c.weight_decay = j.at("weight_decay").get<double>();
    c.schedule = j.at("schedule").get<std::string>();
    c.warmup_epochs = j.at("warmup_epochs").get<double>();
    c.step_epochs = j.at("step_epochs").get<int64_t>();
    c.step_gamma = j.at("step_gamma").get<double>();
    c.model = j.value("model", std::string("mlp"));  // runs saved before CNNs existed were MLPs
    c.hidden = j.at("hidden").get<std::vector<int64_t>>();
    c.channels = j.value("channels", c.channels);
    c.dropout = j.value("dropout", c.dropout);
    c.seed = j.at("seed").get<uint64_t>();
    c.shuffle = j.at("shuffle").get<bool>();
    c.pin_memory = j.at("pin_memory").get<bool>();
    c.limit = j.at("limit").get<int64_t>();
    c.init_path = j.at("init_path").get<std::string>();
    c.skip_nonfinite = j.at("skip_nonfinite").get<bool>();
  } catch (const json::exception& e) {
    throw FormatError(detail::concat("the saved training config is malformed: ", e.what()));
  }
  return c;
}

namespace {

json epoch_json(const EpochMetrics& m) {
  return {{"epoch", m.epoch},           {"train_loss", m.train_loss}, {"train_accuracy", m.train_accuracy},
          {"test_loss", m.test_loss},   {"test_accuracy", m.test_accuracy}, {"seconds", m.seconds},
          {"samples_per_second", m.samples_per_second}, {"lr", m.lr}};
}

EpochMetrics epoch_from_json(const json& j) {
  EpochMetrics m;
  m.epoch = j.at("epoch").get<int64_t>();
  m.train_loss = j.at("train_loss").get<double>();
  m.train_accuracy = j.at("train_accuracy").get<double>();
  m.test_loss = j.at("test_loss").get<double>();
  m.test_accuracy = j.at("test_accuracy").get<double>();
  m.seconds = j.at("seconds").get<double>();
  m.samples_per_second = j.at("samples_per_second").get<double>();
  m.lr = j.at("lr").get<double>();
  return m;
}

json transfers_json(const std::array<TransferStats, 3>& t) {
  json out = json::object();
  for (int i = 0; i < 3; ++i) {
    const TransferStats& s = t[i];
    out[direction_name(static_cast<TransferDirection>(i))] = {{"count", s.count},   {"bytes", s.bytes},
                                                              {"seconds", s.seconds}, {"pinned", s.pinned},
                                                              {"pageable", s.pageable}, {"async", s.async},
                                                              {"sync", s.sync}};
  }
  return out;
}

Architecture architecture_of(const TrainConfig& c) {
  Architecture a = c.model == "cnn" ? Architecture::cnn(c.channels, c.hidden) : Architecture::mlp(c.hidden);
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
  EMBER_CHECK(c.schedule == "constant" || c.schedule == "step" || c.schedule == "cosine", ValueError,
              "--schedule must be constant, step or cosine, got '", c.schedule, "'");
  EMBER_CHECK(!c.hidden.empty(), ValueError, "--hidden needs at least one layer size, e.g. 256,128");
  architecture_of(c).check();
  EMBER_CHECK(c.limit == -1 || c.limit >= 1, ValueError, "--limit must be >= 1, got ", c.limit);
  EMBER_CHECK(!c.nesterov || c.optimizer != "sgd" || c.momentum > 0, ValueError, "--nesterov needs --momentum > 0");
}

std::unique_ptr<optim::LrSchedule> make_schedule(const TrainConfig& c, int64_t steps_per_epoch) {
  int64_t total = std::max<int64_t>(1, c.epochs * steps_per_epoch);
  if (c.schedule == "constant") return std::make_unique<optim::ConstantLr>(c.lr);
  if (c.schedule == "step")
    return std::make_unique<optim::StepLr>(c.lr, std::max<int64_t>(1, c.step_epochs * steps_per_epoch), c.step_gamma);
  int64_t warmup = std::min<int64_t>(total - 1, static_cast<int64_t>(c.warmup_epochs * double(steps_per_epoch)));
  return std::make_unique<optim::CosineLr>(c.lr, total, std::max<int64_t>(0, warmup), 0.0);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, nn::Module& model) {
  if (c.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(model.parameters(), ops::AdamWOptions{.lr = c.lr, .weight_decay = c.weight_decay});
  return std::make_unique<optim::SGD>(
      model.parameters(),
      ops::SgdOptions{.lr = c.lr, .momentum = c.momentum, .dampening = 0, .weight_decay = c.weight_decay, .nesterov = c.nesterov});
}

std::string format_duration(double seconds) {
  char buf[32];
  int s = static_cast<int>(std::max(0.0, seconds) + 0.5);
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

void draw_progress(std::ostream& log, int64_t epoch, int64_t epochs, int64_t done, int64_t total, double loss,
                   double acc, double rate) {
  const int width = 24;
  int filled = total > 0 ? static_cast<int>(width * done / total) : width;
  char buf[200];
  std::snprintf(buf, sizeof buf, "\repoch %lld/%lld [%s%s] %3d%%  loss %.4f  acc %5.2f%%  %7.0f samples/s  ETA %s  ",
                static_cast<long long>(epoch), static_cast<long long>(epochs), std::string(filled, '=').c_str(),
                std::string(width - filled, ' ').c_str(), total > 0 ? static_cast<int>(100 * done / total) : 100, loss,
                100 * acc, rate, format_duration(rate > 0 ? double(total - done) / rate : 0).c_str());
  log << buf << std::flush;
}

void write_run_files(const std::string& dir, const TrainConfig& c, const std::vector<EpochMetrics>& history,
                     const std::array<TransferStats, 3>& transfers) {
  std::ostringstream csv;
  csv << "epoch,train_loss,train_accuracy,test_loss,test_accuracy,seconds,samples_per_second,lr\n";
  for (const auto& m : history) {
    char line[256];
    std::snprintf(line, sizeof line, "%lld,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f,%.8g\n", static_cast<long long>(m.epoch),
                  m.train_loss, m.train_accuracy, m.test_loss, m.test_accuracy, m.seconds, m.samples_per_second, m.lr);
    csv << line;
  }
  write_text_file(dir + "/metrics.csv", csv.str());
  SvgChart loss{"loss", "epoch", "cross-entropy", false, false, {{"train", {}}, {"test", {}}}};
  SvgChart acc{"accuracy", "epoch", "accuracy", false, false, {{"train", {}}, {"test", {}}}};
  for (const auto& m : history) {
    loss.series[0].points.emplace_back(m.epoch, m.train_loss);
    loss.series[1].points.emplace_back(m.epoch, m.test_loss);
    acc.series[0].points.emplace_back(m.epoch, m.train_accuracy);
    acc.series[1].points.emplace_back(m.epoch, m.test_accuracy);
  }
  write_text_file(dir + "/metrics.svg", render_svg({loss, acc}));
  if (!c.metrics_json.empty()) {
    json j{{"device", c.device.str()}, {"config", json::parse(c.to_json())}, {"transfers", transfers_json(transfers)},
           {"epochs", json::array()}};
    for (const auto& m : history) j["epochs"].push_back(epoch_json(m));
    write_text_file(c.metrics_json, j.dump(2) + "\n");
  }
}

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

std::array<TransferStats, 3> ledger_since(const std::array<TransferStats, 3>& start) {
  std::array<TransferStats, 3> out;
  for (int i = 0; i < 3; ++i) {
    TransferStats now = TransferLedger::global().stats(static_cast<TransferDirection>(i));
    const TransferStats& s = start[i];
    out[i] = {now.count - s.count, now.bytes - s.bytes,       now.seconds - s.seconds, now.pinned - s.pinned,
              now.pageable - s.pageable, now.sync - s.sync, now.async - s.async};
  }
  return out;
}

}  // namespace

EvalResult evaluate(nn::Module& model, const Dataset& data, int64_t batch_size, bool confusion, int64_t num_classes,
                    const Shape& sample_shape) {
  bool was_training = model.is_training();
  model.eval();
  Device device = model.device();
  DataLoader loader(data, {.batch_size = batch_size, .shuffle = false, .seed = 0, .drop_last = false, .device = device});
  Tensor loss_sum = Tensor::zeros({}, DType::F32, device), correct = Tensor::zeros({}, DType::F32, device);
  EvalResult r;
  if (confusion) r.confusion.assign(num_classes, std::vector<int64_t>(num_classes, 0));
  const int64_t* labels = data.labels.data<int64_t>();
  nn::CrossEntropyLoss ce;
  Batch batch;
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

TrainResult train_model(const TrainConfig& requested, std::ostream& log) {
  TrainConfig cfg = requested;
  TrainingState resume;
  std::vector<EpochMetrics> history;
  const bool resuming = !requested.resume_dir.empty();
  if (resuming) {
    resume = load_training_state(requested.resume_dir + "/state.safetensors");
    // The run's own settings win, so the continuation is the run that would have happened;
    // only where and how long to train, and where to write, come from this invocation.
    cfg = TrainConfig::from_json(resume.config_json);
    cfg.epochs = requested.epochs;
    cfg.device = requested.device;
    cfg.data_dir = requested.data_dir;
    cfg.out_dir = requested.out_dir.empty() ? requested.resume_dir : requested.out_dir;
    cfg.metrics_json = requested.metrics_json;
    cfg.quiet = requested.quiet;
    cfg.progress_bar = requested.progress_bar;
    cfg.resume_dir = requested.resume_dir;
    try {
      for (const auto& e : json::parse(resume.history_json)) history.push_back(epoch_from_json(e));
    } catch (const json::exception& e) {
      throw FormatError(detail::concat(requested.resume_dir, "/state.safetensors: the saved history is malformed: ",
                                       e.what()));
    }
    EMBER_CHECK(resume.epochs_done < cfg.epochs, ValueError, "the run in ", requested.resume_dir, " already trained ",
                resume.epochs_done, " epoch(s); ask for more with --epochs N (N > ", resume.epochs_done, ")");
  }
  validate(cfg);

  Dataset train_set = load_fashion_mnist(cfg.data_dir, Split::Train, cfg.limit);
  Dataset test_set = load_fashion_mnist(cfg.data_dir, Split::Test);

  Architecture arch = architecture_of(cfg);
  std::shared_ptr<nn::Sequential> model;
  Generator generator(cfg.seed);  // initial weights, then the dropout masks: lives as long as the model
  std::string weights = resuming ? cfg.resume_dir + "/model.safetensors" : cfg.init_path;
  if (!weights.empty()) {
    // The checkpoint's architecture wins over --model/--hidden/--channels.
    Network loaded = load_network(weights, cfg.device, cfg.dropout, generator);
    if (resuming) generator.set_state(cfg.seed, resume.rng_offset);  // dropout continues where it stopped
    EMBER_CHECK(shape_numel(loaded.arch.sample_shape()) == train_set.sample_numel() &&
                    loaded.arch.classes == kFashionMnistClasses,
                FormatError, weights, ": the model is ", loaded.arch.str(), " but Fashion-MNIST needs ",
                train_set.sample_numel(), " inputs and ", kFashionMnistClasses, " outputs");
    model = loaded.model;
    arch = loaded.arch;
    cfg.model = arch.kind;
    cfg.hidden = arch.hidden;
    if (arch.is_cnn()) cfg.channels = arch.channels;
  } else {
    model = make_model(arch, cfg.device, generator);
  }

  model->set_input_grad(false);  // the input is data: the first layer skips its dx GEMM, as PyTorch does
  auto optimizer = make_optimizer(cfg, *model);
  if (resuming) optimizer->load_state_dict(resume.optimizer);
  DataLoader loader(train_set, {.batch_size = cfg.batch_size, .shuffle = cfg.shuffle, .seed = cfg.seed,
                                .drop_last = false, .device = cfg.device, .pin_memory = cfg.pin_memory});
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  auto schedule = make_schedule(cfg, steps_per_epoch);
  int64_t step = resuming ? resume.step : 0;
  const int64_t first_epoch = resuming ? resume.epochs_done + 1 : 1;

  fs::create_directories(cfg.out_dir);
  if (!cfg.quiet) {
    log << "ember train: " << arch.str() << (arch.is_cnn() ? " CNN" : " MLP") << " on " << cfg.device.str() << ", "
        << train_set.size() << " training / " << test_set.size() << " test samples, batch " << cfg.batch_size << ", "
        << cfg.optimizer << " lr " << cfg.lr << " (" << cfg.schedule << ")"
        << (resuming ? ", resuming after epoch " + std::to_string(resume.epochs_done) : "") << "\n"
        << nn::summarize(*model, arch.batch_shape(cfg.batch_size)).table();
  }

  // One scan of the loss and every gradient per step, where they live; the optimizer kernels skip a
  // flagged step's update themselves, so the host never waits for the GPU to decide (docs/reliability.md).
  NonFiniteGuard guard(cfg.device, cfg.skip_nonfinite ? NonFiniteGuard::Mode::Skip : NonFiniteGuard::Mode::Stop);
  optimizer->set_guard(&guard);
  Watched watched(*model);

  std::array<TransferStats, 3> ledger_start;
  for (int i = 0; i < 3; ++i) ledger_start[i] = TransferLedger::global().stats(static_cast<TransferDirection>(i));
  TrainResult result;
  nn::CrossEntropyLoss ce;
  model->train();
  auto run_start = std::chrono::steady_clock::now();
  int64_t samples_trained = 0;
  double train_seconds = 0;
  // Per-step loss and correct count stay on the device; the host reads them to draw progress and at the
  // epoch's end, and averages over the steps whose loss is finite (all of them unless --skip-nonfinite).
  Tensor step_loss = Tensor::empty({steps_per_epoch}, DType::F32, cfg.device);
  Tensor step_correct = Tensor::empty({steps_per_epoch}, DType::I64, cfg.device);
  auto epoch_means = [&](int64_t steps, int64_t* samples_counted) {
    std::vector<float> losses = step_loss.slice(0, 0, steps).to_vector<float>();
    std::vector<int64_t> correct = step_correct.slice(0, 0, steps).to_vector<int64_t>();
    double loss_sum = 0, correct_sum = 0;
    int64_t counted = 0;
    for (int64_t i = 0; i < steps; ++i) {
      const int64_t size = std::min(cfg.batch_size, loader.samples_per_epoch() - i * cfg.batch_size);
      if (!std::isfinite(losses[i])) continue;
      loss_sum += double(losses[i]) * double(size);
      correct_sum += double(correct[i]);
      counted += size;
    }
    *samples_counted = counted;
    return std::pair{counted > 0 ? loss_sum / double(counted) : NAN, counted > 0 ? correct_sum / double(counted) : NAN};
  };
  for (int64_t epoch = first_epoch; epoch <= cfg.epochs; ++epoch) {
    auto epoch_start = std::chrono::steady_clock::now();
    auto last_draw = epoch_start;
    loader.start_epoch(epoch - 1);
    const int64_t skipped_before = cfg.skip_nonfinite ? guard.report().count : 0;
    int64_t samples = 0;
    Batch batch;
    while (loader.next(batch)) {
      optimizer->set_lr(schedule->lr_at(step));
      optimizer->zero_grad();
      Tensor logits = model->forward(arch.is_cnn() ? batch.x.view(arch.batch_shape(batch.size())) : batch.x);
      Tensor loss = ce.forward(logits, batch.y);
      model->backward(ce.backward());
      guard.check(++step, watched.with_loss(loss));
      optimizer->step();
      // Free to read (on CUDA it trails the device by the few steps queued ahead); exact on the CPU.
      if (!cfg.skip_nonfinite && guard.first_bad_step() != 0)
        stop_nonfinite(guard, watched, *model, steps_per_epoch, cfg.lr);
      step_loss.slice(0, batch.index, batch.index + 1).copy_from(loss.view({1}), true);
      step_correct.slice(0, batch.index, batch.index + 1).copy_from(ops::count_correct(logits, batch.y).view({1}), true);
      samples += batch.size();
      if (cfg.progress_bar && !cfg.quiet) {
        auto now = std::chrono::steady_clock::now();
        if (std::chrono::duration<double>(now - last_draw).count() > 0.25) {
          last_draw = now;
          double elapsed = std::chrono::duration<double>(now - epoch_start).count();
          int64_t counted = 0;
          auto [loss_mean, acc] = epoch_means(batch.index + 1, &counted);
          draw_progress(log, epoch, cfg.epochs, samples, loader.samples_per_epoch(), loss_mean, acc,
                        samples / elapsed);
        }
      }
    }
    int64_t counted = 0;
    auto [train_loss, train_acc] = epoch_means(steps_per_epoch, &counted);
    if (cfg.device.is_cuda()) cuda::synchronize(cfg.device);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    samples_trained += samples;
    train_seconds += seconds;
    if (!cfg.skip_nonfinite && guard.first_bad_step() != 0)
      stop_nonfinite(guard, watched, *model, steps_per_epoch, cfg.lr);
    EMBER_CHECK(counted > 0, NumericalError, "every step of epoch ", epoch,
                " had a non-finite loss, so none was applied. Lower --lr (now ", cfg.lr, ")");
    if (cfg.skip_nonfinite && !cfg.quiet) {
      const kernels::GuardReport r = guard.report();
      if (r.count > skipped_before)
        log << (cfg.progress_bar ? "\r" : "") << "epoch " << epoch << ": skipped " << r.count - skipped_before
            << " step(s) with NaN or Inf (the latest: step " << r.last_step << "); the loss and accuracy leave out "
            << samples - counted << " sample(s) whose loss was not finite\n";
    }
    EvalResult test = evaluate(*model, test_set, 1000, false, kFashionMnistClasses, arch.sample_shape());
    EpochMetrics m{epoch, train_loss, train_acc, test.loss, test.accuracy, seconds, double(samples) / seconds,
                   optimizer->lr()};
    history.push_back(m);
    if (!cfg.quiet) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "%sepoch %lld/%lld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  lr %.4g  %.1f s  %.0f "
                    "samples/s\n",
                    cfg.progress_bar ? "\r" : "", static_cast<long long>(epoch), static_cast<long long>(cfg.epochs),
                    train_loss, 100 * train_acc, test.loss, 100 * test.accuracy, m.lr, seconds, m.samples_per_second);
      log << line << std::flush;
    }
    // A checkpoint after every epoch, each file written atomically.
    json hist = json::array();
    for (const auto& h : history) hist.push_back(epoch_json(h));
    save_network(cfg.out_dir + "/model.safetensors", *model, arch);
    save_training_state(cfg.out_dir + "/state.safetensors",
                        {optimizer->state_dict(), epoch, step, generator.offset(), cfg.to_json(), hist.dump()});
    result.transfers = ledger_since(ledger_start);
    write_run_files(cfg.out_dir, cfg, history, result.transfers);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  result.samples_per_second = train_seconds > 0 ? double(samples_trained) / train_seconds : 0;
  result.epochs = history;
  result.test_loss = history.back().test_loss;
  result.test_accuracy = history.back().test_accuracy;
  if (!cfg.quiet) {
    char line[256];
    std::snprintf(line, sizeof line, "test accuracy %.2f%%, loss %.4f | %lld epoch(s) in %.1f s, training at %.0f samples/s on %s\n",
                  100 * result.test_accuracy, result.test_loss,
                  static_cast<long long>(cfg.epochs - first_epoch + 1), result.seconds, result.samples_per_second,
                  cfg.device.str().c_str());
    log << line << "transfers: " << TransferLedger::global().summary() << "saved " << cfg.out_dir
        << "/model.safetensors (PyTorch: model.load_state_dict(safetensors.torch.load_file(...)))\n";
  }
  return result;
}

}  // namespace ember::train
