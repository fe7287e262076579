// What a training run measures and reports: each step's loss and correct count (kept on the device, read a few
// times an epoch), each epoch's figures, the run's files (metrics.csv, metrics.svg, --metrics-json) and the
// progress line.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/transfer_ledger.h"

namespace ember::train {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct EpochMetrics {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0;
  double test_loss = 0, test_accuracy = 0;
  double seconds = 0, samples_per_second = 0;
  double lr = 0;      // at the end of the epoch
};
// One evaluation of a masked language model (train/text_trainer.h): on the fixed held-out batches, after `step`
// steps; train_loss and tokens_per_second over the steps since the previous evaluation.
struct TextMetrics {
  int64_t step = 0;
  double masked_accuracy = 0, masked_loss = 0;
  double train_loss = 0, tokens_per_second = 0;
  double seconds = 0;  // training time of those steps
  double lr = 0;       // at the end of them
};
// "step 500/2000  train loss ... held-out masked acc ...% loss ...  lr ...  ... s  ... tokens/s"
std::string text_metrics_line(const TextMetrics& m, int64_t steps, bool after_progress_bar);
// "\rstep 120/2000 [===     ] 6%  loss 3.1234  5100 tokens/s  ETA 6:12  "
void draw_text_progress(std::ostream& log, int64_t step, int64_t steps, double loss, double tokens_per_second);
// As a JSON array, and back (FormatError naming `where` when malformed): a text run's history in its state file.
std::string text_history_json(const std::vector<TextMetrics>& history);
std::vector<TextMetrics> text_history_from_json(const std::string& json, const std::string& where);
// metrics.csv (step, masked_accuracy, masked_loss, train_loss, tokens_per_second, seconds, lr) and metrics.svg in
// `dir`; with `metrics_json`, the run's JSON record there too ({device, config, evaluations}).
void write_text_run_files(const std::string& dir, const std::vector<TextMetrics>& history,
                          const std::string& metrics_json, const std::string& device, const std::string& config_json);

// As a JSON object, and back (FormatError naming `where` when malformed).
std::string epoch_json(const EpochMetrics& m);
std::string history_json(const std::vector<EpochMetrics>& history);  // a JSON array
std::vector<EpochMetrics> history_from_json(const std::string& json, const std::string& where);

// H2D, D2H and D2D counts of the transfer ledger.
using LedgerCounts = std::array<TransferStats, 3>;
LedgerCounts ledger_now();
LedgerCounts ledger_since(const LedgerCounts& start);

// Each step's loss (of the global batch) and this rank's correct count, in slots on the device: writing them is
// a device copy, and the host reads them only to draw progress and at the epoch's end.
class StepRecord {
 public:
  StepRecord(int64_t steps_per_epoch, Device device);
  void record(int64_t step_in_epoch, const Tensor& loss, const Tensor& correct, int64_t global_rows);

  // Over the first `steps` steps of the epoch, those whose loss is finite (all unless steps were skipped).
  struct Sums {
    double loss = 0;     // sum of loss * rows
    double correct = 0;  // this rank's correct predictions
    double rows = 0;     // rows of the global batches
    double mean_loss() const { return loss / rows; }
    double accuracy() const { return correct / rows; }
  };
  Sums sums(int64_t steps) const;

 private:
  Tensor loss_, correct_;            // (steps_per_epoch) f32 and int64 on the device
  std::vector<int64_t> rows_;        // rows of each step's global batch
};

// "\repoch 3/20 [=====   ] 21%  loss 0.5213  acc 81.20%  190000 samples/s  ETA 0:02  "
void draw_progress(std::ostream& log, int64_t epoch, int64_t epochs, int64_t done, int64_t total, double loss,
                   double acc, double rate);
// "epoch 3/20  train loss ... lr ...  1.2 s  190000 samples/s" (after a progress bar: starting with \r)
std::string epoch_line(const EpochMetrics& m, int64_t epochs, bool after_progress_bar);

// metrics.csv and metrics.svg in `dir` and, when `metrics_json` is given, the JSON record of the run with its
// config (a JSON object) and transfer counts there.
void write_run_files(const std::string& dir, const std::vector<EpochMetrics>& history, const std::string& metrics_json,
                     const std::string& device, const std::string& config_json, const LedgerCounts& transfers);

}  // namespace ember::train
