// Saving and loading MLP weights and training state as safetensors.
#include "train/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace ember::train {

namespace {

std::string format_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);  // round-trips exactly
  return buf;
}

double parse_double(const std::string& file, const std::string& key, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  EMBER_CHECK(!text.empty() && end == text.c_str() + text.size(), FormatError, file, ": metadata '", key,
              "' should be a number, found '", text, "'");
  return v;
}

const std::string& metadata(const SafetensorsFile& f, const std::string& file, const std::string& key) {
  auto it = f.metadata.find(key);
  EMBER_CHECK(it != f.metadata.end(), FormatError, file, ": metadata has no '", key,
              "': not a training state written by ember");
  return it->second;
}

}  // namespace

std::shared_ptr<nn::Sequential> make_mlp(const std::vector<int64_t>& sizes, Device device, Generator& generator) {
  EMBER_CHECK(sizes.size() >= 2, ValueError, "an MLP needs at least an input and an output size, got ",
              architecture_string(sizes));
  auto model = std::make_shared<nn::Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    EMBER_CHECK(sizes[i] > 0 && sizes[i + 1] > 0, ValueError, "layer sizes must be positive, got ",
                architecture_string(sizes));
    model->push_back(std::make_shared<nn::Linear>(sizes[i], sizes[i + 1], true, DType::F32, device, generator));
    if (i + 2 < sizes.size()) model->push_back(std::make_shared<nn::ReLU>());
  }
  return model;
}

std::string architecture_string(const std::vector<int64_t>& sizes) {
  std::string s;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) s += '-';
    s += std::to_string(sizes[i]);
  }
  return s;
}

void save_model(const std::string& path, const nn::Module& model, const std::vector<int64_t>& sizes) {
  NamedTensors tensors;
  for (const auto& [name, p] : model.named_parameters()) tensors.emplace_back(name, p->value);
  save_safetensors(path, tensors, {{"format", "pt"}, {"ember_architecture", architecture_string(sizes)}});
}

LoadedModel load_mlp(const std::string& path, Device device) {
  SafetensorsFile file = load_safetensors(path);
  // Collect "<index>.weight" / "<index>.bias" pairs, ordered by index.
  std::map<int64_t, std::pair<Tensor, Tensor>> layers;
  for (const auto& [name, t] : file.tensors) {
    size_t dot = name.find('.');
    int64_t index = -1;
    std::string kind = dot == std::string::npos ? "" : name.substr(dot + 1);
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + (dot == std::string::npos ? 0 : dot), index);
    EMBER_CHECK(dot != std::string::npos && ec == std::errc() && ptr == name.data() + dot && index >= 0 &&
                    (kind == "weight" || kind == "bias"),
                FormatError, path, ": tensor '", name,
                "' is not a parameter of a Linear/ReLU Sequential (expected names like 0.weight, 0.bias, 2.weight)");
    EMBER_CHECK(t.dtype() == DType::F32, FormatError, path, ": tensor '", name, "' is ", dtype_name(t.dtype()),
                ", expected float32");
    (kind == "weight" ? layers[index].first : layers[index].second) = t;
  }
  EMBER_CHECK(!layers.empty(), FormatError, path, ": the file holds no weights");
  std::vector<int64_t> sizes;
  int64_t expected_index = 0;
  for (const auto& [index, wb] : layers) {
    const auto& [w, b] = wb;
    EMBER_CHECK(index == expected_index, FormatError, path, ": expected layer ", expected_index,
                " next (Linear layers at 0, 2, 4, ... with ReLU between), found layer ", index);
    EMBER_CHECK(w.defined() && b.defined(), FormatError, path, ": layer ", index, " needs both ", index, ".weight and ",
                index, ".bias");
    EMBER_CHECK(w.dim() == 2 && b.dim() == 1 && b.size(0) == w.size(0), FormatError, path, ": layer ", index,
                " has weight ", shape_str(w.shape()), " and bias ", shape_str(b.shape()), "; expected (out, in) and (out)");
    if (sizes.empty()) sizes.push_back(w.size(1));
    EMBER_CHECK(w.size(1) == sizes.back(), FormatError, path, ": layer ", index, " takes ", w.size(1),
                " inputs but the previous layer gives ", sizes.back());
    sizes.push_back(w.size(0));
    expected_index += 2;
  }
  Generator unused(0);
  LoadedModel out{make_mlp(sizes, Device::meta(), unused), sizes};
  auto params = out.model->named_parameters();
  for (auto& [name, p] : params) {
    for (const auto& [fname, t] : file.tensors)
      if (fname == name) p->value = t.contiguous().to(device);
    p->grad = Tensor::zeros(p->value.shape(), p->value.dtype(), device);
  }
  return out;
}

void save_training_state(const std::string& path, const TrainingState& state) {
  NamedTensors tensors;
  for (const auto& [name, t] : state.optimizer.tensors) tensors.emplace_back("optimizer." + name, t);
  std::map<std::string, std::string> meta{{"format", "ember-training-state"},
                                          {"epochs_done", std::to_string(state.epochs_done)},
                                          {"step", std::to_string(state.step)},
                                          {"rng_offset", std::to_string(state.rng_offset)},
                                          {"config", state.config_json},
                                          {"history", state.history_json.empty() ? "[]" : state.history_json}};
  for (const auto& [name, v] : state.optimizer.scalars) meta["optimizer." + name] = format_double(v);
  save_safetensors(path, tensors, meta);
}

TrainingState load_training_state(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  EMBER_CHECK(metadata(file, path, "format") == "ember-training-state", FormatError, path,
              ": metadata format is '", metadata(file, path, "format"), "', expected 'ember-training-state'");
  TrainingState s;
  s.epochs_done = static_cast<int64_t>(parse_double(path, "epochs_done", metadata(file, path, "epochs_done")));
  s.step = static_cast<int64_t>(parse_double(path, "step", metadata(file, path, "step")));
  // States written before the CNN (no dropout to resume) have no generator position: 0.
  if (file.metadata.count("rng_offset") != 0) {
    const std::string& text = file.metadata.at("rng_offset");
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), s.rng_offset);
    EMBER_CHECK(ec == std::errc() && ptr == text.data() + text.size(), FormatError, path,
                ": metadata 'rng_offset' should be an unsigned integer, found '", text, "'");
  }
  s.config_json = metadata(file, path, "config");
  s.history_json = metadata(file, path, "history");
  for (const auto& [key, value] : file.metadata)
    if (key.rfind("optimizer.", 0) == 0) s.optimizer.scalars[key.substr(10)] = parse_double(path, key, value);
  for (const auto& [name, t] : file.tensors) {
    EMBER_CHECK(name.rfind("optimizer.", 0) == 0, FormatError, path, ": unexpected tensor '", name, "'");
    s.optimizer.tensors.emplace_back(name.substr(10), t);
  }
  return s;
}

}  // namespace ember::train
