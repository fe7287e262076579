// The MLP, the CNN, the ViT and BERT: their sizes, names and checks, and the nn modules they are built of.
#include "models/architecture.h"

#include <sstream>

#include "models/bert.h"
#include "models/vit.h"
#include "nn/nn.h"

namespace ember::models {

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

Architecture Architecture::vit(int64_t patch, int64_t dim, int64_t depth, int64_t heads, int64_t feedforward) {
  Architecture a;
  a.kind = "vit";
  a.patch = patch, a.dim = dim, a.depth = depth, a.heads = heads, a.feedforward = feedforward;
  a.dropout = 0.1;
  return a;
}

Architecture Architecture::bert(int64_t seq_len, int64_t dim, int64_t depth, int64_t heads, int64_t feedforward) {
  Architecture a = vit(7, dim, depth, heads, feedforward);
  a.kind = "bert";
  a.seq_len = seq_len;
  a.classes = 257;
  return a;
}

std::string Architecture::family() const { return is_cnn() ? "CNN" : is_vit() ? "ViT" : is_bert() ? "BERT" : "MLP"; }

Shape Architecture::sample_shape() const {
  if (is_bert()) return {seq_len};
  if (is_cnn() || is_vit()) return {in_channels, height, width};
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
  std::ostringstream s;
  if (is_bert()) {
    s << 't' << seq_len << "-d" << dim << "-l" << depth << "-h" << heads << "-f" << feedforward << '-' << classes;
    return s.str();
  }
  if (is_vit()) {
    s << in_channels << 'x' << height << 'x' << width << "-p" << patch << "-d" << dim << "-l" << depth << "-h" << heads
      << "-f" << feedforward << '-' << classes;
    return s.str();
  }
  if (is_cnn()) {
    s << in_channels << 'x' << height << 'x' << width;
    for (int64_t c : channels) s << "-c" << c;
    if (kernel != 3) s << "-k" << kernel;
    for (int64_t h : hidden) s << '-' << h;
    s << '-' << classes;
    return s.str();
  }
  const std::vector<int64_t> sizes = linear_sizes();
  for (size_t i = 0; i < sizes.size(); ++i) s << (i == 0 ? "" : "-") << sizes[i];
  return s.str();
}

namespace {

// A Transformer's sizes: positive, a width the heads divide.
void check_transformer(const Architecture& a) {
  EMBER_CHECK(a.dim > 0 && a.depth > 0 && a.heads > 0 && a.feedforward > 0, ValueError,
              "--dim, --depth, --heads and --feedforward must be >= 1, got ", a.dim, ", ", a.depth, ", ", a.heads, ", ", a.feedforward);
  EMBER_CHECK(a.dim % a.heads == 0, ValueError, "--dim ", a.dim, " is not divisible by --heads ", a.heads,
              "; choose a head count that divides the width");
}

// The ViT's: a patch that tiles the image, and the Transformer's.
void check_vit(const Architecture& a) {
  EMBER_CHECK(a.patch > 0 && a.height % a.patch == 0 && a.width % a.patch == 0, ValueError, "--patch ", a.patch,
              " does not divide the ", a.height, "x", a.width, " image; use a patch size that divides both sides (",
              a.height == 28 ? "4, 7 or 14" : "a divisor", ")");
  EMBER_CHECK(a.input_std > 0, ValueError, "the input std must be > 0, got ", a.input_std);
  check_transformer(a);
}

}  // namespace

void Architecture::check() const {
  EMBER_CHECK(kind == "mlp" || kind == "cnn" || kind == "vit" || kind == "bert", ValueError,
              "--model must be mlp, cnn, vit or bert, got '", kind, "'");
  EMBER_CHECK(in_channels > 0 && height > 0 && width > 0 && classes > 0, ValueError, "the input and class counts of ",
              str(), " must be positive");
  EMBER_CHECK(dropout >= 0 && dropout < 1, ValueError, "--dropout must be in [0, 1), got ", dropout);
  if (is_vit()) return check_vit(*this);
  if (is_bert()) {
    EMBER_CHECK(seq_len >= 1, ValueError, "--seq-len must be >= 1, got ", seq_len);
    return check_transformer(*this);
  }
  for (int64_t h : hidden) EMBER_CHECK(h > 0, ValueError, "--hidden sizes must be >= 1, got ", h);
  if (!is_cnn()) return;
  EMBER_CHECK(!channels.empty(), ValueError, "--channels needs at least one conv block, e.g. 32,64");
  for (int64_t c : channels) EMBER_CHECK(c > 0, ValueError, "--channels must be >= 1, got ", c);
  EMBER_CHECK(kernel > 0 && kernel % 2 == 1, ValueError, "the conv kernel must be odd (padding kernel / 2 keeps the size), got ", kernel);
  EMBER_CHECK(channels.size() < 31 && (height >> channels.size()) >= 1 && (width >> channels.size()) >= 1, ValueError,
              channels.size(), " conv blocks (each with a 2x2 max pool) halve a ", height, "x", width,
              " image to nothing; use fewer --channels");
}

namespace {

// Linear(+ReLU) layers of `sizes`: each hidden one fused with its ReLU (an Identity keeps the ReLU's index, and so
// PyTorch's names), then Dropout when `dropout` is given; the last one plain.
void push_linear_layers(nn::Sequential& model, const std::vector<int64_t>& sizes, const double* dropout, Device device,
                        Generator& generator) {
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    if (i + 2 == sizes.size()) {
      model.push_back(std::make_shared<nn::Linear>(sizes[i], sizes[i + 1], true, DType::F32, device, generator));
      break;
    }
    model.push_back(std::make_shared<nn::LinearReLU>(sizes[i], sizes[i + 1], true, DType::F32, device, generator));
    model.push_back(std::make_shared<nn::Identity>());
    if (dropout != nullptr) model.push_back(std::make_shared<nn::Dropout>(*dropout, generator));
  }
}

}  // namespace

std::shared_ptr<nn::Module> make_model(const Architecture& arch, Device device, Generator& generator) {
  arch.check();
  if (arch.is_vit()) return std::make_shared<VisionTransformer>(arch, device, generator);
  if (arch.is_bert()) return std::make_shared<BertMaskedLM>(arch, device, generator);
  auto model = std::make_shared<nn::Sequential>();
  if (!arch.is_cnn()) {
    push_linear_layers(*model, arch.linear_sizes(), nullptr, device, generator);
    return model;
  }
  int64_t in = arch.in_channels;
  for (int64_t out : arch.channels) {
    model->push_back(std::make_shared<nn::Conv2d>(in, out, arch.kernel, 1, arch.kernel / 2, true, DType::F32, device,
                                                  generator));
    // BatchNorm2d, ReLU and MaxPool2d(2) fused (nn/fuse.h): the Identities keep the state_dict's indices.
    model->push_back(std::make_shared<nn::BatchNormReLUPool>(out, ops::Pool2dParams{}, 1e-5, 0.1, DType::F32, device));
    model->push_back(std::make_shared<nn::Identity>());
    model->push_back(std::make_shared<nn::Identity>());
    in = out;
  }
  model->push_back(std::make_shared<nn::Flatten>());
  push_linear_layers(*model, arch.linear_sizes(), &arch.dropout, device, generator);
  return model;
}

}  // namespace ember::models
