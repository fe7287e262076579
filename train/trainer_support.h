// train_model()'s parts that are not the loop itself: the config's checks and the objects it names, the
// run's records (epoch JSON, metrics.csv/.svg, transfer counts) and the progress line. Internal to train/.
#pragma once

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "models/io.h"
#include "optim/optimizer.h"
#include "train/trainer.h"

namespace ember::train::internal {

using json = nlohmann::json;

void validate(const TrainConfig& c);
models::Architecture architecture_of(const TrainConfig& c);
std::unique_ptr<optim::LrSchedule> make_schedule(const TrainConfig& c, int64_t steps_per_epoch);
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, nn::Module& model);

json epoch_json(const EpochMetrics& m);
EpochMetrics epoch_from_json(const json& j);
// metrics.csv, metrics.svg and (with --metrics-json) the JSON record of the run in `dir`.
void write_run_files(const std::string& dir, const TrainConfig& c, const std::vector<EpochMetrics>& history,
                     const std::array<TransferStats, 3>& transfers);
// The transfer ledger's counts since `start` (a snapshot of it).
std::array<TransferStats, 3> ledger_now();
std::array<TransferStats, 3> ledger_since(const std::array<TransferStats, 3>& start);

std::string format_duration(double seconds);
void draw_progress(std::ostream& log, int64_t epoch, int64_t epochs, int64_t done, int64_t total, double loss,
                   double acc, double rate);

}  // namespace ember::train::internal
