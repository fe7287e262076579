// A torchinfo-like summary: each layer with its output shape, parameter count, bytes and device.
// Run on a model moved to Device::meta() it allocates nothing, so it tells how much GPU memory a
// model and a batch will need before any is spent.
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"

namespace ember::nn {

struct LayerSummary {
  std::string path, type;
  Shape output_shape;
  int64_t parameters = 0;  // of this layer alone (not its children)
  int64_t parameter_bytes = 0;
  Device device;
};

struct ModelSummary {
  std::vector<LayerSummary> layers;
  int64_t parameters = 0;
  int64_t parameter_bytes = 0;   // values; gradients take as much again
  int64_t activation_bytes = 0;  // every layer output of one forward pass for this input
  int64_t input_bytes = 0;
  std::string table() const;     // aligned text, one row per layer plus totals
};

// Runs one forward pass of `model` on an input of `input_shape` created on the model's device
// (zeros; nothing is allocated on meta) and records every layer.
ModelSummary summarize(Module& model, const Shape& input_shape);
// The same with an input of `input_dtype` (a text model's int64 token ids).
ModelSummary summarize(Module& model, const Shape& input_shape, DType input_dtype);

namespace detail {
// Called by Module::operator() and Sequential: records a layer's output while a summary runs.
void record_layer(const Module& layer, const Tensor& output);
}  // namespace detail

}  // namespace ember::nn
