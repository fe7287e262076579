// Building the MLP and the CNN, saving either as a PyTorch state_dict, and recognising either in a file.
#include "train/models.h"

#include <charconv>
#include <map>

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "train/checkpoint.h"
#include "train/safetensors.h"

namespace ember::train {

Architecture Architecture::mlp(std::vector<int64_t> hidden) {
  Architecture a;
  a.hidden = std::move(hidden);
  return a;
}

Architecture Architecture::cnn(std::vector<int64_t> channels, std::vector<int64_t> hidden) {
  Architecture a;
  a.kind = "cnn";
  a.channels = std::move(channels);
  a.hidden = std::move(hidden);
  return a;
}

Shape Architecture::sample_shape() const {
  if (is_cnn()) return {in_channels, height, width};
  return {in_channels * height * width};
}

Shape Architecture::batch_shape(int64_t batch) const {
  Shape s{batch};
  for (int64_t d : sample_shape()) s.push_back(d);
  return s;
}

std::vector<int64_t> Architecture::linear_sizes() const {
  int64_t features = in_channels * height * width;
  if (is_cnn()) {
    int64_t h = height, w = width;
    for (size_t i = 0; i < channels.size(); ++i) {
      h /= 2;  // each block's 2x2 max pool (the conv keeps the size: padding kernel / 2)
      w /= 2;
    }
    features = (channels.empty() ? in_channels : channels.back()) * h * w;
  }
  std::vector<int64_t> sizes{features};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(classes);
  return sizes;
}

std::string Architecture::str() const {
  if (!is_cnn()) return architecture_string(linear_sizes());
  std::string s = std::to_string(in_channels) + "x" + std::to_string(height) + "x" + std::to_string(width);
  for (int64_t c : channels) s += "-c" + std::to_string(c);
  if (kernel != 3) s += "-k" + std::to_string(kernel);
  for (int64_t h : hidden) s += "-" + std::to_string(h);
  return s + "-" + std::to_string(classes);
}

void Architecture::check() const {
  EMBER_CHECK(kind == "mlp" || kind == "cnn", ValueError, "--model must be mlp or cnn, got '", kind, "'");
  EMBER_CHECK(in_channels > 0 && height > 0 && width > 0 && classes > 0, ValueError, "the input and class counts of ",
              str(), " must be positive");
  for (int64_t h : hidden) EMBER_CHECK(h > 0, ValueError, "--hidden sizes must be >= 1, got ", h);
  if (!is_cnn()) return;
  EMBER_CHECK(!channels.empty(), ValueError, "--channels needs at least one conv block, e.g. 32,64");
  for (int64_t c : channels) EMBER_CHECK(c > 0, ValueError, "--channels must be >= 1, got ", c);
  EMBER_CHECK(kernel > 0 && kernel % 2 == 1, ValueError, "the conv kernel must be odd (padding kernel / 2 keeps the size), got ", kernel);
  EMBER_CHECK(channels.size() < 31 && (height >> channels.size()) >= 1 && (width >> channels.size()) >= 1, ValueError,
              channels.size(), " conv blocks (each with a 2x2 max pool) halve a ", height, "x", width,
              " image to nothing; use fewer --channels");
  EMBER_CHECK(dropout >= 0 && dropout < 1, ValueError, "--dropout must be in [0, 1), got ", dropout);
}

std::shared_ptr<nn::Sequential> make_model(const Architecture& arch, Device device, Generator& generator) {
  arch.check();
  if (!arch.is_cnn()) return make_mlp(arch.linear_sizes(), device, generator);
  auto model = std::make_shared<nn::Sequential>();
  int64_t in = arch.in_channels;
  for (int64_t out : arch.channels) {
    model->push_back(std::make_shared<nn::Conv2d>(in, out, arch.kernel, 1, arch.kernel / 2, true, DType::F32, device,
                                                  generator));
    model->push_back(std::make_shared<nn::BatchNorm2d>(out, 1e-5, 0.1, DType::F32, device));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::MaxPool2d>(2));
    in = out;
  }
  model->push_back(std::make_shared<nn::Flatten>());
  const std::vector<int64_t> sizes = arch.linear_sizes();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    model->push_back(std::make_shared<nn::Linear>(sizes[i], sizes[i + 1], true, DType::F32, device, generator));
    if (i + 2 < sizes.size()) {
      model->push_back(std::make_shared<nn::ReLU>());
      model->push_back(std::make_shared<nn::Dropout>(arch.dropout, generator));
    }
  }
  return model;
}

void save_network(const std::string& path, const nn::Module& model, const Architecture& arch) {
  save_safetensors(path, model.state_dict(), {{"format", "pt"}, {"ember_architecture", arch.str()}});
}

namespace {

// "12.running_mean" -> (12, "running_mean"); false for any other shape of name.
bool split_name(const std::string& name, int64_t* index, std::string* field) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + dot, *index);
  *field = name.substr(dot + 1);
  return ec == std::errc() && ptr == name.data() + dot && *index >= 0 && !field->empty();
}

// The CNN family's layout: conv blocks at 0, 4, 8, ... (conv, BatchNorm, ReLU, pool), the Flatten, then
// Linear layers every 3 (Linear, ReLU, Dropout). The 28x28 input is Fashion-MNIST's: files do not say it.
Architecture infer_cnn(const std::string& path, const std::map<int64_t, std::map<std::string, Tensor>>& layers) {
  Architecture a = Architecture::cnn({}, {});
  auto weight = [&](int64_t index) -> const Tensor* {
    auto it = layers.find(index);
    if (it == layers.end()) return nullptr;
    auto w = it->second.find("weight");
    return w == it->second.end() ? nullptr : &w->second;
  };
  int64_t index = 0;
  for (; weight(index) != nullptr && weight(index)->dim() == 4; index += 4) {
    const Tensor& w = *weight(index);
    EMBER_CHECK(w.size(2) == w.size(3) && w.size(2) % 2 == 1 && (a.channels.empty() || w.size(2) == a.kernel),
                FormatError, path, ": conv ", index, ".weight is ", shape_str(w.shape()),
                "; ember's CNNs use one odd square kernel size in every block");
    if (a.channels.empty()) a.in_channels = w.size(1);
    a.kernel = w.size(2);
    a.channels.push_back(w.size(0));
  }
  std::vector<int64_t> outs;
  for (index += 1; weight(index) != nullptr && weight(index)->dim() == 2; index += 3) outs.push_back(weight(index)->size(0));
  EMBER_CHECK(!outs.empty(), FormatError, path, ": expected Linear layers after the ", a.channels.size(),
              " conv block(s), at ", 4 * a.channels.size() + 1, ", ", 4 * a.channels.size() + 4, ", ...");
  a.classes = outs.back();
  outs.pop_back();
  a.hidden = outs;
  const int64_t first_in = weight(4 * static_cast<int64_t>(a.channels.size()) + 1)->size(1);
  EMBER_CHECK(first_in == a.linear_sizes().front(), FormatError, path, ": the first Linear takes ", first_in,
              " features, but ", a.channels.size(), " conv block(s) on a ", a.in_channels, "x", a.height, "x", a.width,
              " image give ", a.linear_sizes().front());
  return a;
}

}  // namespace

Network load_network(const std::string& path, Device device, double dropout, Generator& generator) {
  SafetensorsFile file = load_safetensors(path);
  std::map<int64_t, std::map<std::string, Tensor>> layers;
  bool has_conv = false;
  for (const auto& [name, t] : file.tensors) {
    int64_t index = 0;
    std::string field;
    EMBER_CHECK(split_name(name, &index, &field), FormatError, path, ": tensor '", name,
                "' is not a parameter or buffer of an nn.Sequential (expected names like 0.weight, 1.running_mean)");
    layers[index][field] = t;
    has_conv = has_conv || (field == "weight" && t.dim() == 4);
  }
  if (!has_conv) {
    LoadedModel mlp = load_mlp(path, device);
    Architecture a = Architecture::mlp({mlp.sizes.begin() + 1, mlp.sizes.end() - 1});
    a.height = 1;
    a.width = mlp.sizes.front();
    a.classes = mlp.sizes.back();
    if (a.width == 28 * 28) a.height = a.width = 28;
    return {mlp.model, a};
  }
  Network net{nullptr, infer_cnn(path, layers)};
  net.arch.dropout = dropout;
  net.model = make_model(net.arch, device, generator);  // the initial values are overwritten below
  try {
    net.model->load_state_dict(file.tensors);
  } catch (const Error& e) {
    throw FormatError(ember::detail::concat(path, ": ", e.what()));
  }
  return net;
}

}  // namespace ember::train
