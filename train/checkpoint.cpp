// Saving and loading the training state as safetensors metadata and tensors.
#include "train/checkpoint.h"

#include <charconv>
#include <cstdio>

#include "formats/safetensors.h"
#include "models/io.h"

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

const std::string& metadata(const formats::SafetensorsFile& f, const std::string& file, const std::string& key) {
  auto it = f.metadata.find(key);
  EMBER_CHECK(it != f.metadata.end(), FormatError, file, ": metadata has no '", key,
              "': not a training state written by ember");
  return it->second;
}

}  // namespace

void save_training_state(const std::string& path, const TrainingState& state) {
  formats::NamedTensors tensors;
  for (const auto& [name, t] : state.optimizer.tensors) tensors.emplace_back("optimizer." + name, t);
  std::map<std::string, std::string> meta{{"format", "ember-training-state"},
                                          {"epochs_done", std::to_string(state.epochs_done)},
                                          {"step", std::to_string(state.step)},
                                          {"rng_offset", std::to_string(state.rng_offset)},
                                          {"config", state.config_json},
                                          {"history", state.history_json.empty() ? "[]" : state.history_json}};
  for (const auto& [name, v] : state.optimizer.scalars) meta["optimizer." + name] = format_double(v);
  formats::save_safetensors(path, tensors, meta);
}

TrainingState load_training_state(const std::string& path) {
  formats::SafetensorsFile file = formats::load_safetensors(path);
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

void save_checkpoint(const std::string& dir, const nn::Module& model, const models::Architecture& arch,
                     const TrainingState& state) {
  models::save_model(dir + "/model.safetensors", model, arch);
  save_training_state(dir + "/state.safetensors", state);
}

}  // namespace ember::train
