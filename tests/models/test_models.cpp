// The MLP and CNN builders and checkpoints: the CNN's state_dict is exactly torch_cnn.py's, a PyTorch-written
// CNN loads and predicts PyTorch's logits, ember's CNN round-trips (buffers included), bad files are named.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "core/ops.h"
#include "nn/nn.h"
#include "support/compare.h"
#include "models/io.h"
#include "formats/safetensors.h"

using namespace ember;
using namespace ember::models;
using namespace ember::formats;
namespace fs = std::filesystem;

namespace {
#include "models/torch_cnn_checkpoint.inc"

const fs::path kTorchData = fs::path(EMBER_SOURCE_DIR) / "tests" / "fixtures" / "torch";

std::string dtype_tag(DType d) { return d == DType::F32 ? "F32" : d == DType::I64 ? "I64" : dtype_name(d); }

// The closed-form images of make_cnn_checkpoint.py, (B, 1, 28, 28).
Tensor images(int64_t B) {
  std::vector<float> v;
  for (int64_t k = 0; k < B; ++k)
    for (int64_t i = 0; i < 28 * 28; ++i) v.push_back(float(0.5 + 0.5 * std::sin(0.013 * double(i) * double(k + 1) + 0.7 * double(k))));
  return Tensor::from_vector(v, {B, 1, 28, 28});
}

fs::path temp_file(const std::string& name) { return fs::temp_directory_path() / ("ember_test_models_" + name); }

}  // namespace

TEST_CASE("The default CNN's state_dict is torch_cnn.py's: names, order, dtypes and shapes", "[models]") {
  Generator g(0);
  auto model = make_model(Architecture::cnn({32, 64}, {128}), Device::cpu(), g);
  auto state = model->state_dict();
  REQUIRE(state.size() == kTorchPeerState.size());
  for (size_t i = 0; i < state.size(); ++i) {
    const auto& [name, dtype, shape] = kTorchPeerState[i];
    INFO(name);
    CHECK(state[i].first == name);
    CHECK(dtype_tag(state[i].second.dtype()) == dtype);
    CHECK(state[i].second.shape() == Shape(shape.begin(), shape.end()));
  }
  CHECK(Architecture::cnn({32, 64}, {128}).str() == "1x28x28-c32-c64-128-10");
  CHECK(Architecture::mlp({256, 128}).str() == "784-256-128-10");
}

TEST_CASE("A CNN written by PyTorch loads into ember and predicts PyTorch's logits", "[models]") {
  Network net = load_model((kTorchData / "cnn_torch.safetensors").string());
  CHECK(net.arch.str() == "1x28x28-c4-c8-16-10");
  auto* bn = dynamic_cast<nn::BatchNorm2d*>(net.model->children().at(1).second.get());
  REQUIRE(bn != nullptr);
  CHECK(bn->num_batches_tracked().item<int64_t>() == 3);
  net.model->eval();
  const Tensor logits = net.model->forward(images(4));
  REQUIRE_CLOSE(logits.to_vector<float>(), std::vector<double>(std::begin(kTorchCheckpointLogits), std::end(kTorchCheckpointLogits)),
                test::kF32Reduce);
}

TEST_CASE("An ember CNN checkpoint round-trips with its running statistics", "[models]") {
  Generator g(3);
  const Architecture arch = Architecture::cnn({4, 6}, {12});
  auto model = make_model(arch, Device::cpu(), g);
  model->forward(images(5));  // training mode: running statistics move
  const fs::path path = temp_file("roundtrip.safetensors");
  save_model(path.string(), *model, arch);
  SafetensorsFile file = load_safetensors(path.string());
  CHECK(file.metadata.at("format") == "pt");
  CHECK(file.metadata.at("ember_architecture") == "1x28x28-c4-c6-12-10");
  Network back = load_model(path.string());
  CHECK(back.arch.str() == arch.str());
  const auto a = model->state_dict(), b = back.model->state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.to(DType::F64).to_vector<double>() == b[i].second.to(DType::F64).to_vector<double>());
  }
  model->eval();
  back.model->eval();
  CHECK(model->forward(images(2)).to_vector<float>() == back.model->forward(images(2)).to_vector<float>());
  fs::remove(path);
}

TEST_CASE("CNN checkpoints that do not fit the family are FormatErrors naming the file", "[models]") {
  SafetensorsFile torch_file = load_safetensors((kTorchData / "cnn_torch.safetensors").string());
  auto write_without = [&](const std::string& drop, const std::string& name) {
    NamedTensors kept;
    for (const auto& [n, t] : torch_file.tensors)
      if (n != drop) kept.emplace_back(n, t);
    const fs::path path = temp_file(name);
    save_safetensors(path.string(), kept);
    return path.string();
  };
  const std::string missing = write_without("5.running_var", "missing.safetensors");
  CHECK_THROWS_AS(load_model(missing), FormatError);
  CHECK_THROWS_WITH(load_model(missing), Catch::Contains(missing) && Catch::Contains("missing keys: 5.running_var"));
  const std::string no_linear = write_without("9.weight", "no_linear.safetensors");
  CHECK_THROWS_WITH(load_model(no_linear), Catch::Contains("expected Linear layers after the 2 conv block(s)"));
  NamedTensors odd = torch_file.tensors;
  for (auto& [n, t] : odd)
    if (n == "4.weight") t = Tensor::zeros({8, 4, 3, 2});
  const fs::path odd_path = temp_file("odd.safetensors");
  save_safetensors(odd_path.string(), odd);
  CHECK_THROWS_WITH(load_model(odd_path.string()), Catch::Contains("one odd square kernel size"));
  for (const auto& p : {fs::path(missing), fs::path(no_linear), odd_path}) fs::remove(p);
}

namespace {

// The nn.Sequential a PyTorch user writes for `arch` (plain Linear, BatchNorm2d and ReLU modules), holding the
// builder's model's values.
std::shared_ptr<nn::Sequential> plain_twin(const Architecture& arch, const nn::Module& built) {
  auto m = std::make_shared<nn::Sequential>();
  int64_t in = arch.in_channels;
  for (int64_t out : arch.channels) {
    m->push_back(std::make_shared<nn::Conv2d>(in, out, arch.kernel, 1, arch.kernel / 2));
    m->push_back(std::make_shared<nn::BatchNorm2d>(out));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::MaxPool2d>(2));
    in = out;
  }
  if (arch.is_cnn()) m->push_back(std::make_shared<nn::Flatten>());
  const std::vector<int64_t> sizes = arch.linear_sizes();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    m->push_back(std::make_shared<nn::Linear>(sizes[i], sizes[i + 1]));
    if (i + 2 == sizes.size()) break;
    m->push_back(std::make_shared<nn::ReLU>());
    if (arch.is_cnn()) m->push_back(std::make_shared<nn::Dropout>(0.0));
  }
  m->load_state_dict(built.state_dict());
  return m;
}

std::vector<double> f64(const Tensor& t) { return t.to(DType::F64).to_vector<double>(); }

}  // namespace

TEST_CASE("The builders' fused models give a user's plain Sequential's outputs and gradients, bit for bit", "[models]") {
  for (const Architecture& given : {Architecture::mlp({16, 8}), Architecture::cnn({2, 3}, {8})}) {
    Architecture arch = given;
    arch.dropout = 0;
    INFO(arch.str());
    Generator g(4);
    auto built = make_model(arch, Device::cpu(), g);
    auto plain = plain_twin(arch, *built);
    const Tensor x = images(3).view(arch.batch_shape(3));
    const Tensor labels = Tensor::from_vector<int64_t>({1, 7, 3}, {3});
    nn::CrossEntropyLoss ce_built, ce_plain;
    ce_built.forward(built->forward(x), labels);
    ce_plain.forward(plain->forward(x), labels);
    CHECK(f64(ce_built.probabilities()) == f64(ce_plain.probabilities()));
    CHECK(f64(built->backward(ce_built.backward())) == f64(plain->backward(ce_plain.backward())));
    const auto a = built->named_parameters(), b = plain->named_parameters();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].first);
      CHECK(a[i].first == b[i].first);
      CHECK(f64(a[i].second->grad) == f64(b[i].second->grad));
    }
  }
}

TEST_CASE("MLP checkpoints that do not fit the family are FormatErrors naming the file", "[models]") {
  Generator g(5);
  const Architecture arch = Architecture::mlp({6});
  auto model = make_model(arch, Device::cpu(), g);
  auto write = [&](const std::string& name, const NamedTensors& tensors) {
    const fs::path path = temp_file(name);
    save_safetensors(path.string(), tensors);
    return path.string();
  };
  NamedTensors state = model->state_dict();  // 0.weight (6, 784), 0.bias, 2.weight (10, 6), 2.bias
  NamedTensors chain = state;
  chain[2].second = Tensor::zeros({10, 5});
  NamedTensors renamed = state;
  renamed[2].first = "3.weight";
  const std::string empty = write("empty.safetensors", {}), broken = write("chain.safetensors", chain),
                    moved = write("renamed.safetensors", renamed), odd = write("odd.safetensors", {{"weight", state[0].second}});
  CHECK_THROWS_WITH(load_model(empty), Catch::Contains(empty) && Catch::Contains("holds no weights"));
  CHECK_THROWS_WITH(load_model(broken), Catch::Contains("layer 2 takes 5 inputs but the previous layer gives 6"));
  CHECK_THROWS_WITH(load_model(moved), Catch::Contains(moved) && Catch::Contains("unexpected keys: 2.bias, 3.weight"));
  CHECK_THROWS_WITH(load_model(odd), Catch::Contains("is not a parameter or buffer of an nn.Sequential"));
  for (const auto& p : {empty, broken, moved, odd}) fs::remove(p);
}
