// train_text_model(): `ember train --model bert` as a function. Steps of random masked windows of the corpus
// (data/text.h) through a BertMaskedLM, an evaluation on the fixed held-out batches every --eval-every steps and at
// the end, and the run directory (model.safetensors, metrics.csv, metrics.svg); as one rank of a data-parallel run,
// each rank takes its rows of every global batch.
#pragma once

#include <iosfwd>

#include "distributed/communicator.h"
#include "train/config.h"
#include "train/trainer.h"

namespace ember::train {

// result.text holds each evaluation; test_loss and test_accuracy are the last one's masked loss and accuracy.
TrainResult train_text_model(const TrainConfig& config, std::ostream& log, dist::Communicator& comm);

}  // namespace ember::train
