// The run's records: JSON, CSV and SVG of the epochs, the ledger's counts, the per-step slots on the device.
#include "train/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "formats/file.h"
#include "formats/svg.h"

namespace ember::train {

using json = nlohmann::json;

namespace {

json to_json(const EpochMetrics& m) {
  return {{"epoch", m.epoch},           {"train_loss", m.train_loss}, {"train_accuracy", m.train_accuracy},
          {"test_loss", m.test_loss},   {"test_accuracy", m.test_accuracy}, {"seconds", m.seconds},
          {"samples_per_second", m.samples_per_second}, {"lr", m.lr}};
}

EpochMetrics from_json(const json& j) {
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

json transfers_json(const LedgerCounts& t) {
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

std::string csv(const std::vector<EpochMetrics>& history) {
  std::ostringstream out;
  out << "epoch,train_loss,train_accuracy,test_loss,test_accuracy,seconds,samples_per_second,lr\n";
  for (const auto& m : history) {
    char line[256];
    std::snprintf(line, sizeof line, "%lld,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f,%.8g\n", static_cast<long long>(m.epoch),
                  m.train_loss, m.train_accuracy, m.test_loss, m.test_accuracy, m.seconds, m.samples_per_second, m.lr);
    out << line;
  }
  return out.str();
}

std::string svg(const std::vector<EpochMetrics>& history) {
  formats::SvgChart loss{"loss", "epoch", "cross-entropy", false, false, {{"train", {}}, {"test", {}}}};
  formats::SvgChart acc{"accuracy", "epoch", "accuracy", false, false, {{"train", {}}, {"test", {}}}};
  for (const auto& m : history) {
    loss.series[0].points.emplace_back(m.epoch, m.train_loss);
    loss.series[1].points.emplace_back(m.epoch, m.test_loss);
    acc.series[0].points.emplace_back(m.epoch, m.train_accuracy);
    acc.series[1].points.emplace_back(m.epoch, m.test_accuracy);
  }
  return formats::render_svg({loss, acc});
}

json to_json(const TextMetrics& m) {
  return {{"step", m.step},           {"masked_accuracy", m.masked_accuracy}, {"masked_loss", m.masked_loss},
          {"train_loss", m.train_loss}, {"tokens_per_second", m.tokens_per_second}, {"seconds", m.seconds},
          {"lr", m.lr}};
}

std::string format_duration(double seconds) {
  char buf[32];
  int s = static_cast<int>(std::max(0.0, seconds) + 0.5);
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

}  // namespace

std::string epoch_json(const EpochMetrics& m) { return to_json(m).dump(); }

std::string history_json(const std::vector<EpochMetrics>& history) {
  json out = json::array();
  for (const auto& m : history) out.push_back(to_json(m));
  return out.dump();
}

std::vector<EpochMetrics> history_from_json(const std::string& text, const std::string& where) {
  std::vector<EpochMetrics> out;
  try {
    for (const auto& e : json::parse(text)) out.push_back(from_json(e));
  } catch (const json::exception& e) {
    throw FormatError(detail::concat(where, ": the saved history is malformed: ", e.what()));
  }
  return out;
}

LedgerCounts ledger_now() {
  LedgerCounts out;
  for (int i = 0; i < 3; ++i) out[i] = TransferLedger::global().stats(static_cast<TransferDirection>(i));
  return out;
}

LedgerCounts ledger_since(const LedgerCounts& start) {
  LedgerCounts out = ledger_now();
  for (int i = 0; i < 3; ++i) {
    TransferStats& n = out[i];
    const TransferStats& s = start[i];
    n = {n.count - s.count, n.bytes - s.bytes, n.seconds - s.seconds, n.pinned - s.pinned,
         n.pageable - s.pageable, n.sync - s.sync, n.async - s.async};
  }
  return out;
}

StepRecord::StepRecord(int64_t steps_per_epoch, Device device)
    : loss_(Tensor::empty({steps_per_epoch}, DType::F32, device)),
      correct_(Tensor::empty({steps_per_epoch}, DType::I64, device)),
      rows_(static_cast<size_t>(steps_per_epoch), 0) {}

void StepRecord::record(int64_t step, const Tensor& loss, const Tensor& correct, int64_t global_rows) {
  loss_.slice(0, step, step + 1).copy_from(loss.view({1}), true);
  correct_.slice(0, step, step + 1).copy_from(correct.view({1}), true);
  rows_[static_cast<size_t>(step)] = global_rows;
}

StepRecord::Sums StepRecord::sums(int64_t steps) const {
  const std::vector<float> losses = loss_.slice(0, 0, steps).to_vector<float>();
  const std::vector<int64_t> correct = correct_.slice(0, 0, steps).to_vector<int64_t>();
  Sums s;
  for (int64_t i = 0; i < steps; ++i) {
    if (!std::isfinite(losses[i])) continue;
    const auto rows = double(rows_[static_cast<size_t>(i)]);
    s.loss += double(losses[i]) * rows;
    s.correct += double(correct[i]);
    s.rows += rows;
  }
  return s;
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

std::string epoch_line(const EpochMetrics& m, int64_t epochs, bool after_progress_bar) {
  char line[256];
  std::snprintf(line, sizeof line,
                "%sepoch %lld/%lld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  lr %.4g  %.1f s  %.0f "
                "samples/s\n",
                after_progress_bar ? "\r" : "", static_cast<long long>(m.epoch), static_cast<long long>(epochs),
                m.train_loss, 100 * m.train_accuracy, m.test_loss, 100 * m.test_accuracy, m.lr, m.seconds,
                m.samples_per_second);
  return line;
}

void write_run_files(const std::string& dir, const std::vector<EpochMetrics>& history, const std::string& metrics_json,
                     const std::string& device, const std::string& config_json, const LedgerCounts& transfers) {
  formats::write_text_file(dir + "/metrics.csv", csv(history));
  formats::write_text_file(dir + "/metrics.svg", svg(history));
  if (metrics_json.empty()) return;
  json j{{"device", device}, {"config", json::parse(config_json)}, {"transfers", transfers_json(transfers)},
         {"epochs", json::array()}};
  for (const auto& m : history) j["epochs"].push_back(to_json(m));
  formats::write_text_file(metrics_json, j.dump(2) + "\n");
}

std::string text_metrics_line(const TextMetrics& m, int64_t steps, bool after_progress_bar) {
  char line[256];
  std::snprintf(line, sizeof line,
                "%sstep %lld/%lld  train loss %.4f  held-out masked acc %.2f%% loss %.4f  lr %.4g  %.1f s  %.0f "
                "tokens/s\n",
                after_progress_bar ? "\r" : "", static_cast<long long>(m.step), static_cast<long long>(steps),
                m.train_loss, 100 * m.masked_accuracy, m.masked_loss, m.lr, m.seconds, m.tokens_per_second);
  return line;
}

void draw_text_progress(std::ostream& log, int64_t step, int64_t steps, double loss, double tokens_per_second) {
  const int width = 24;
  const int filled = static_cast<int>(width * step / std::max<int64_t>(1, steps));
  char buf[200];
  std::snprintf(buf, sizeof buf, "\rstep %lld/%lld [%s%s] %3d%%  loss %.4f  %7.0f tokens/s  ", static_cast<long long>(step),
                static_cast<long long>(steps), std::string(filled, '=').c_str(),
                std::string(width - filled, ' ').c_str(), static_cast<int>(100 * step / std::max<int64_t>(1, steps)),
                loss, tokens_per_second);
  log << buf << std::flush;
}

std::string text_history_json(const std::vector<TextMetrics>& history) {
  json out = json::array();
  for (const auto& m : history) out.push_back(to_json(m));
  return out.dump();
}

std::vector<TextMetrics> text_history_from_json(const std::string& text, const std::string& where) {
  std::vector<TextMetrics> out;
  try {
    for (const auto& j : json::parse(text))
      out.push_back({j.at("step").get<int64_t>(), j.at("masked_accuracy").get<double>(),
                     j.at("masked_loss").get<double>(), j.at("train_loss").get<double>(),
                     j.at("tokens_per_second").get<double>(), j.at("seconds").get<double>(), j.at("lr").get<double>()});
  } catch (const json::exception& e) {
    throw FormatError(detail::concat(where, ": the saved history is malformed: ", e.what()));
  }
  return out;
}

void write_text_run_files(const std::string& dir, const std::vector<TextMetrics>& history,
                          const std::string& metrics_json, const std::string& device, const std::string& config_json) {
  std::ostringstream csv;
  csv << "step,masked_accuracy,masked_loss,train_loss,tokens_per_second,seconds,lr\n";
  formats::SvgChart loss{"loss", "step", "cross-entropy", false, false, {{"train", {}}, {"held-out masked", {}}}};
  formats::SvgChart acc{"masked accuracy", "step", "accuracy", false, false, {{"held-out masked", {}}}};
  json evaluations = json::array();
  for (const auto& m : history) {
    char line[256];
    std::snprintf(line, sizeof line, "%lld,%.6f,%.6f,%.6f,%.1f,%.3f,%.8g\n", static_cast<long long>(m.step),
                  m.masked_accuracy, m.masked_loss, m.train_loss, m.tokens_per_second, m.seconds, m.lr);
    csv << line;
    loss.series[0].points.emplace_back(m.step, m.train_loss);
    loss.series[1].points.emplace_back(m.step, m.masked_loss);
    acc.series[0].points.emplace_back(m.step, m.masked_accuracy);
    evaluations.push_back(to_json(m));
  }
  formats::write_text_file(dir + "/metrics.csv", csv.str());
  formats::write_text_file(dir + "/metrics.svg", formats::render_svg({loss, acc}));
  if (metrics_json.empty()) return;
  const json j{{"device", device}, {"config", json::parse(config_json)}, {"evaluations", evaluations}};
  formats::write_text_file(metrics_json, j.dump(2) + "\n");
}

}  // namespace ember::train
