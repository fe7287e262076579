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

// Loss and accuracy of `model` (in eval mode; its mode is given back) on `data`, in batches on the model's device,
// each sample shaped as `arch` takes it; with `confusion`, the confusion matrix and per-class accuracy too.
EvalResult evaluate(nn::Module& model, const models::Architecture& arch, const data::Dataset& data, int64_t batch_size,
                    bool confusion);

// FormatError unless a model of `arch`, read from `source`, takes `data`'s samples and gives its classes.
void check_model_fits(const models::Architecture& arch, const data::Dataset& data, const std::string& source);

}  // namespace ember::train
