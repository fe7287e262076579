// Evaluating a model on a labelled image set: loss, accuracy and, when asked, the confusion matrix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "models/architecture.h"
#include "nn/module.h"

namespace ember::train {

struct EvalResult {
  double loss = 0, accuracy = 0;
  int64_t samples = 0;
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]
  std::vector<double> per_class_accuracy;
};

// Test images a batch when `ember train` and `ember eval` evaluate. Results do not depend on it (eval mode treats
// samples alone); speed does: at 1000 a CNN batch's activations (100 MB for the first convolution's output) outgrew
// the host block cache, so each batch was fresh memory whose huge pages the kernel zeroed (docs/benchmarks.md).
constexpr int64_t kEvalBatch = 250;

// Loss and accuracy of `model` (in eval mode; its mode is given back) on `data`, in batches on the model's device,
// each sample shaped as `arch` takes it; with `confusion`, the confusion matrix and per-class accuracy too.
EvalResult evaluate(nn::Module& model, const models::Architecture& arch, const data::Dataset& data, int64_t batch_size,
                    bool confusion);

// FormatError unless a model of `arch`, read from `source`, takes `data`'s samples and gives its classes.
void check_model_fits(const models::Architecture& arch, const data::Dataset& data, const std::string& source);

}  // namespace ember::train
