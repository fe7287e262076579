// The training loop for Fashion-MNIST MLPs: data on the chosen device, SGD/AdamW with a schedule,
// per-epoch evaluation, checkpoints every epoch, exact resume, metrics as JSON, CSV and SVG.
#pragma once

#include <array>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/transfer_ledger.h"
#include "distributed/communicator.h"
#include "nn/module.h"
#include "data/dataset.h"
#include "distributed/ddp.h"

namespace ember::train {

struct TrainConfig {
  std::string data_dir = data::default_fashion_mnist_dir();
  Device device = Device::cpu();
  int64_t epochs = 20;
  int64_t batch_size = 128;
  std::string optimizer = "sgd";   // sgd | adamw
  double lr = 0.1;
  double momentum = 0.9;
  bool nesterov = true;
  double weight_decay = 1e-4;
  std::string schedule = "cosine"; // constant | step | cosine
  double warmup_epochs = 1;        // cosine: linear warmup
  int64_t step_epochs = 5;         // step: decay every this many epochs
  double step_gamma = 0.1;
  std::string model = "mlp";       // mlp | cnn (train/models.h)
  std::vector<int64_t> hidden = {256, 128};
  std::vector<int64_t> channels = {32, 64};  // cnn: conv block widths
  double dropout = 0.25;           // cnn: after each hidden Linear
  uint64_t seed = 0;
  bool shuffle = true;
  bool pin_memory = true;
  int64_t limit = -1;              // first N training samples (-1: all)
  std::string init_path;           // start from these weights
  std::string resume_dir;          // continue this run
  std::string out_dir = "runs/fashion-mnist";
  std::string metrics_json;        // also write metrics here
  bool quiet = false;
  bool progress_bar = false;       // \r progress on a terminal; plain lines otherwise
  bool skip_nonfinite = false;     // skip updates whose loss or gradients hold NaN/Inf instead of stopping
  int64_t bucket_kb = 256;         // data-parallel: gradients are summed in buckets of about this size

  std::string to_json() const;
  static TrainConfig from_json(const std::string& json);  // FormatError on a malformed config
};

struct EpochMetrics {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0;
  double test_loss = 0, test_accuracy = 0;
  double seconds = 0, samples_per_second = 0;
  double lr = 0;      // at the end of the epoch
};

struct TrainResult {
  std::vector<EpochMetrics> epochs;  // including those of the run resumed from
  double test_loss = 0, test_accuracy = 0;
  double seconds = 0, samples_per_second = 0;  // this invocation's training time and throughput
  std::array<TransferStats, 3> transfers{};    // H2D, D2H, D2D during this invocation
  dist::AllReduceStats all_reduce;                   // this rank's gradient all-reduces (data-parallel runs)
};

struct EvalResult {
  double loss = 0, accuracy = 0;
  int64_t samples = 0;
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]
  std::vector<double> per_class_accuracy;
};

// Trains as configured, writing progress to `log`, and the run directory:
// model.safetensors, state.safetensors, metrics.csv, metrics.svg (and --metrics-json).
// As one rank of `comm` (dist::world() by default: the ranks mpirun started, else this process alone):
// every rank starts from rank 0's weights, takes its part of each global batch of batch_size samples, and
// applies the gradients summed over all ranks; rank 0 alone logs and writes files (docs/distributed.md).
TrainResult train_model(const TrainConfig& config, std::ostream& log);
TrainResult train_model(const TrainConfig& config, std::ostream& log, dist::Communicator& comm);

// Loss and accuracy of `model` on `data` (batches on the model's device, each sample viewed as
// `sample_shape`: (784) for an MLP, (1, 28, 28) for a CNN); with `confusion`, the confusion matrix and
// per-class accuracy too.
EvalResult evaluate(nn::Module& model, const data::Dataset& data, int64_t batch_size, bool confusion,
                    int64_t num_classes = data::kFashionMnistClasses, const Shape& sample_shape = {});

}  // namespace ember::train
