// save_model and load_model: a state_dict in safetensors, and an Architecture recognised from its tensors.
#include "models/io.h"

#include <charconv>
#include <cmath>
#include <map>

#include "formats/safetensors.h"

namespace ember::models {

namespace {

// The file's tensors by layer: "12.running_mean" is layers[12]["running_mean"].
using Layers = std::map<int64_t, std::map<std::string, Tensor>>;

// "12.running_mean" -> (12, "running_mean"); false for any other shape of name.
bool split_name(const std::string& name, int64_t* index, std::string* field) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + dot, *index);
  *field = name.substr(dot + 1);
  return ec == std::errc() && ptr == name.data() + dot && *index >= 0 && !field->empty();
}

Layers group_by_layer(const std::string& path, const formats::NamedTensors& tensors) {
  Layers layers;
  for (const auto& [name, t] : tensors) {
    int64_t index = 0;
    std::string field;
    EMBER_CHECK(split_name(name, &index, &field), FormatError, path, ": tensor '", name,
                "' is not a parameter or buffer of an nn.Sequential (expected names like 0.weight, 1.running_mean)");
    layers[index][field] = t;
  }
  EMBER_CHECK(!layers.empty(), FormatError, path, ": the file holds no weights");
  return layers;
}

const Tensor* weight_of(const Layers& layers, int64_t index) {
  auto it = layers.find(index);
  if (it == layers.end()) return nullptr;
  auto w = it->second.find("weight");
  return w == it->second.end() ? nullptr : &w->second;
}

bool has_conv(const Layers& layers) {
  for (const auto& [index, fields] : layers)
    for (const auto& [field, t] : fields)
      if (field == "weight" && t.dim() == 4) return true;
  return false;
}

// The MLP family's layout: Linear layers at 0, 2, 4, ... with a ReLU between them. A 784-feature input is taken
// for a 28x28 image (Fashion-MNIST's), any other as a row of pixels.
Architecture infer_mlp(const std::string& path, const Layers& layers) {
  std::vector<int64_t> sizes;
  for (int64_t index = 0; weight_of(layers, index) != nullptr && weight_of(layers, index)->dim() == 2; index += 2) {
    const Tensor& w = *weight_of(layers, index);
    if (sizes.empty()) sizes.push_back(w.size(1));
    EMBER_CHECK(w.size(1) == sizes.back(), FormatError, path, ": layer ", index, " takes ", w.size(1),
                " inputs but the previous layer gives ", sizes.back());
    sizes.push_back(w.size(0));
  }
  EMBER_CHECK(!sizes.empty(), FormatError, path,
              ": expected Linear layers at 0, 2, 4, ... (0.weight of shape (out, in)) or conv blocks");
  Architecture a = Architecture::mlp({sizes.begin() + 1, sizes.end() - 1});
  a.classes = sizes.back();
  a.height = 1;
  a.width = sizes.front();
  if (a.width == 28 * 28) a.height = a.width = 28;
  return a;
}

// The CNN family's layout: conv blocks at 0, 4, 8, ... (conv, BatchNorm, ReLU, pool), the Flatten, then
// Linear layers every 3 (Linear, ReLU, Dropout). The 28x28 input is Fashion-MNIST's: files do not say it.
Architecture infer_cnn(const std::string& path, const Layers& layers) {
  Architecture a = Architecture::cnn({}, {});
  auto weight = [&](int64_t index) { return weight_of(layers, index); };
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

const Tensor* find(const formats::NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

// The tensor called `name` with `dims` dims, or a FormatError saying it is missing or has the wrong shape.
const Tensor& named_tensor(const std::string& path, const formats::NamedTensors& tensors, const std::string& name,
                           int64_t dims, const char* family = "ViT") {
  const Tensor* t = find(tensors, name);
  EMBER_CHECK(t != nullptr, FormatError, path, ": a ", family, " checkpoint needs '", name, "', which is missing");
  EMBER_CHECK(t->dim() == dims, FormatError, path, ": '", name, "' should have ", dims, " dims but has shape ",
              shape_str(t->shape()));
  return *t;
}

int64_t encoder_depth(const formats::NamedTensors& t) {
  int64_t depth = 0;
  while (find(t, "encoder.layers." + std::to_string(depth) + ".norm1.weight") != nullptr) ++depth;
  return depth;
}

// The head count, which no tensor's shape holds: "-hN" in ember's metadata, else the peers' 4.
int64_t heads_of(const formats::SafetensorsFile& file) {
  int64_t heads = 4;
  auto meta = file.metadata.find("ember_architecture");
  const size_t at = meta == file.metadata.end() ? std::string::npos : meta->second.find("-h");
  if (at != std::string::npos) {
    const char* first = meta->second.data() + at + 2;
    std::from_chars(first, meta->second.data() + meta->second.size(), heads);
  }
  return heads;
}

// The byte-level BERT's layout (models/bert.h): sizes from the tensors' shapes, the heads as for the ViT.
Architecture infer_bert(const std::string& path, const formats::SafetensorsFile& file) {
  const auto& t = file.tensors;
  const Tensor& tok = named_tensor(path, t, "tok.weight", 2, "BERT");
  const Tensor& pos = named_tensor(path, t, "pos", 3, "BERT");
  const int64_t depth = encoder_depth(t);
  EMBER_CHECK(depth > 0 && pos.size(2) == tok.size(1), FormatError, path, ": not a BERT of encoder.layers.N (",
              depth, " encoder layers, tok.weight ", shape_str(tok.shape()), ", pos ", shape_str(pos.shape()), ")");
  Architecture a = Architecture::bert(pos.size(1), tok.size(1), depth, heads_of(file),
                                      named_tensor(path, t, "encoder.layers.0.linear1.weight", 2, "BERT").size(0));
  a.classes = tok.size(0);
  EMBER_CHECK(a.classes == named_tensor(path, t, "head.3.weight", 2, "BERT").size(0), FormatError, path,
              ": the head predicts ", named_tensor(path, t, "head.3.weight", 2, "BERT").size(0),
              " tokens but the vocabulary holds ", a.classes);
  return a;
}

// The ViT's layout (models/vit.h), a 1x28x28 input: sizes from the tensors' shapes, the head count (which no
// shape holds) from ember's metadata, else the peer's 4.
Architecture infer_vit(const std::string& path, const formats::SafetensorsFile& file) {
  const auto& t = file.tensors;
  const Tensor& patch_w = named_tensor(path, t, "patch_embed.weight", 2);
  const auto patch = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(patch_w.size(1)))));
  const int64_t depth = encoder_depth(t);
  EMBER_CHECK(patch * patch == patch_w.size(1) && depth > 0, FormatError, path,
              ": not a ViT of 1-channel square patches with encoder.layers.N (patch_embed.weight is ",
              shape_str(patch_w.shape()), ", ", depth, " encoder layers)");
  Architecture a = Architecture::vit(patch, patch_w.size(0), depth, heads_of(file),
                                     named_tensor(path, t, "encoder.layers.0.linear1.weight", 2).size(0));
  a.classes = named_tensor(path, t, "head.weight", 2).size(0);
  const Tensor& pos = named_tensor(path, t, "pos_embedding", 3);
  EMBER_CHECK(a.height % patch == 0 && pos.size(1) == a.patches() + 1, FormatError, path, ": pos_embedding holds ",
              pos.size(1), " positions, but ", patch, "x", patch, " patches of a 28x28 image need ", a.patches() + 1);
  return a;
}

}  // namespace

void save_model(const std::string& path, const nn::Module& model, const Architecture& arch) {
  formats::save_safetensors(path, model.state_dict(), {{"format", "pt"}, {"ember_architecture", arch.str()}});
}

Network load_model(const std::string& path, Device device, double dropout, Generator& generator) {
  formats::SafetensorsFile file = formats::load_safetensors(path);
  Network net;
  if (find(file.tensors, "class_token") != nullptr) {
    net.arch = infer_vit(path, file);
  } else if (find(file.tensors, "tok.weight") != nullptr) {
    net.arch = infer_bert(path, file);
  } else {
    const Layers layers = group_by_layer(path, file.tensors);
    net.arch = has_conv(layers) ? infer_cnn(path, layers) : infer_mlp(path, layers);
  }
  net.arch.dropout = dropout;
  try {
    net.model = make_model(net.arch, device, generator);  // the initial values are overwritten below
    net.model->load_state_dict(file.tensors);
  } catch (const Error& e) {
    throw FormatError(ember::detail::concat(path, ": ", e.what()));
  }
  return net;
}

}  // namespace ember::models
