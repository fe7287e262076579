// summarize(): traces one forward pass and tabulates the layers.
#include "nn/summary.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

namespace ember::nn {

namespace {

thread_local ModelSummary* g_trace = nullptr;

int64_t own_parameters(const Module& m, int64_t* bytes) {
  int64_t n = 0, b = 0;
  auto all = m.named_parameters();
  for (const auto& [name, p] : all) {
    if (name.find('.') != std::string::npos) continue;  // belongs to a child
    n += p->value.numel();
    b += static_cast<int64_t>(p->value.nbytes());
  }
  *bytes = b;
  return n;
}

std::string human_bytes(int64_t bytes) {
  char buf[32];
  if (bytes >= (int64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  else if (bytes >= (int64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  else if (bytes >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

// Every module's training flag, parent before children, and back: the trace runs in eval mode.
void collect_modes(const Module& m, std::vector<bool>& out) {
  out.push_back(m.is_training());
  for (const auto& [name, child] : m.children()) collect_modes(*child, out);
}

void restore_modes(Module& m, const std::vector<bool>& modes, size_t& next) {
  m.train(modes[next++]);  // sets the whole subtree; the children then get their own flags back
  for (const auto& [name, child] : m.children()) restore_modes(*child, modes, next);
}

// While a summary traces its forward pass: the trace is on and every module is in eval mode; afterwards each gets
// its own mode back. In training mode the pass would change the model: BatchNorm would fold the zero input into
// its running statistics and Dropout would draw from its generator, so a run that prints its summary would train
// other weights than a quiet one.
class TraceScope {
 public:
  TraceScope(Module& model, ModelSummary& summary) : model_(model) {
    collect_modes(model, modes_);
    model.eval();
    g_trace = &summary;
  }
  ~TraceScope() {
    g_trace = nullptr;
    size_t next = 0;
    restore_modes(model_, modes_, next);
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Module& model_;
  std::vector<bool> modes_;
};

}  // namespace

void detail::record_layer(const Module& layer, const Tensor& output) {
  if (g_trace == nullptr) return;
  LayerSummary s;
  s.path = layer.path();
  s.type = layer.type_name();
  s.output_shape = output.shape();
  s.parameters = own_parameters(layer, &s.parameter_bytes);
  s.device = output.device();  // where the layer ran (a ReLU has no parameters to ask)
  g_trace->activation_bytes += static_cast<int64_t>(output.nbytes());
  g_trace->layers.push_back(std::move(s));
}

ModelSummary summarize(Module& model, const Shape& input_shape) { return summarize(model, input_shape, model.dtype()); }

ModelSummary summarize(Module& model, const Shape& input_shape, DType input_dtype) {
  ModelSummary summary;
  Tensor input = Tensor::zeros(input_shape, input_dtype, model.device());
  summary.input_bytes = static_cast<int64_t>(input.nbytes());
  {
    TraceScope scope(model, summary);
    model(input);
  }
  // The root records itself last; show it first.
  if (!summary.layers.empty() && summary.layers.back().path == model.path()) {
    LayerSummary root = summary.layers.back();
    summary.layers.pop_back();
    summary.activation_bytes -= shape_numel(root.output_shape) * static_cast<int64_t>(dtype_size(model.dtype()));
    summary.layers.insert(summary.layers.begin(), root);
  }
  for (const auto& p : model.parameters()) {
    summary.parameters += p->value.numel();
    summary.parameter_bytes += static_cast<int64_t>(p->value.nbytes());
  }
  return summary;
}

std::string ModelSummary::table() const {
  std::ostringstream out;
  char line[256];
  int type_width = 14;  // as wide as the longest type name ("BatchNormReLUPool")
  for (const auto& l : layers) type_width = std::max(type_width, static_cast<int>(l.type.size()));
  const std::string rule(static_cast<size_t>(72 + type_width), '-');
  std::snprintf(line, sizeof line, "%-18s %-*s %-16s %12s %12s  %s\n", "layer", type_width, "type", "output shape",
                "params", "bytes", "device");
  out << line << rule << '\n';
  for (const auto& l : layers) {
    std::snprintf(line, sizeof line, "%-18s %-*s %-16s %12lld %12s  %s\n", l.path.c_str(), type_width, l.type.c_str(),
                  shape_str(l.output_shape).c_str(), static_cast<long long>(l.parameters),
                  human_bytes(l.parameter_bytes).c_str(), l.device.str().c_str());
    out << line;
  }
  out << rule << '\n';
  out << "parameters: " << parameters << " (" << human_bytes(parameter_bytes) << ", as much again for gradients)\n";
  out << "input: " << human_bytes(input_bytes) << ", activations of one forward pass: " << human_bytes(activation_bytes)
      << '\n';
  out << "estimated training memory (params + grads + input + activations, optimizer state not counted): "
      << human_bytes(2 * parameter_bytes + input_bytes + activation_bytes) << '\n';
  return out.str();
}

}  // namespace ember::nn
