// TrainConfig as JSON, its checks, the optimizer and schedule it names, and the run's records.
#include "train/trainer_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "train/checkpoint.h"
#include "formats/svg.h"

namespace ember::train {

using internal::json;

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

namespace internal {

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

models::Architecture architecture_of(const TrainConfig& c) {
  models::Architecture a = c.model == "cnn" ? models::Architecture::cnn(c.channels, c.hidden) : models::Architecture::mlp(c.hidden);
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
  EMBER_CHECK(c.bucket_kb >= 1, ValueError, "--bucket-kb must be >= 1, got ", c.bucket_kb);
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
  formats::write_text_file(dir + "/metrics.csv", csv.str());
  formats::SvgChart loss{"loss", "epoch", "cross-entropy", false, false, {{"train", {}}, {"test", {}}}};
  formats::SvgChart acc{"accuracy", "epoch", "accuracy", false, false, {{"train", {}}, {"test", {}}}};
  for (const auto& m : history) {
    loss.series[0].points.emplace_back(m.epoch, m.train_loss);
    loss.series[1].points.emplace_back(m.epoch, m.test_loss);
    acc.series[0].points.emplace_back(m.epoch, m.train_accuracy);
    acc.series[1].points.emplace_back(m.epoch, m.test_accuracy);
  }
  formats::write_text_file(dir + "/metrics.svg", formats::render_svg({loss, acc}));
  if (!c.metrics_json.empty()) {
    json j{{"device", c.device.str()}, {"config", json::parse(c.to_json())}, {"transfers", transfers_json(transfers)},
           {"epochs", json::array()}};
    for (const auto& m : history) j["epochs"].push_back(epoch_json(m));
    formats::write_text_file(c.metrics_json, j.dump(2) + "\n");
  }
}

std::array<TransferStats, 3> ledger_now() {
  std::array<TransferStats, 3> out;
  for (int i = 0; i < 3; ++i) out[i] = TransferLedger::global().stats(static_cast<TransferDirection>(i));
  return out;
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

}  // namespace internal

}  // namespace ember::train
