// train_model(): `ember train` as a function. A Trainer runs epochs of Stepper steps over the DataLoader's
// batches, evaluates on the test set after each, and writes the run directory (train/checkpoint.h,
// train/metrics.h); as one rank of a data-parallel run it shares the work with the others (docs/distributed.md).
#pragma once

#include <iosfwd>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/ddp.h"
#include "train/config.h"
#include "train/metrics.h"

namespace ember::train {

struct TrainResult {
  std::vector<EpochMetrics> epochs;  // including those of the run resumed from
  std::vector<TextMetrics> text;     // a text model's evaluations (train/text_trainer.h) instead of epochs
  double test_loss = 0, test_accuracy = 0;
  double seconds = 0, samples_per_second = 0;  // this invocation's training time and throughput (text: tokens/s)
  LedgerCounts transfers{};                    // H2D, D2H, D2D during this invocation
  dist::AllReduceStats all_reduce;             // this rank's gradient all-reduces (data-parallel runs)
};

// Trains as configured (a bert model: train_text_model), writing progress to `log`, and the run directory:
// model.safetensors, state.safetensors, metrics.csv, metrics.svg (and --metrics-json).
// As one rank of `comm` (dist::world() by default: the ranks mpirun started, else this process alone):
// every rank starts from rank 0's weights, takes its part of each global batch of batch_size samples, and
// applies the gradients summed over all ranks; rank 0 alone logs and writes files.
TrainResult train_model(const TrainConfig& config, std::ostream& log);
TrainResult train_model(const TrainConfig& config, std::ostream& log, dist::Communicator& comm);

}  // namespace ember::train
