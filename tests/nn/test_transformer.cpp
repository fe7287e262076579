// MultiheadAttention, TransformerEncoderLayer, TransformerEncoder and the ViT: PyTorch's state_dict names and
// initial values, float64 gradient checks of the input and every parameter (both norm orders, ReLU and GELU, a
// causal mask, a key padding mask, sequence-first inputs), dropout that is the identity in eval, and the errors.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "core/ops.h"
#include "models/vit.h"
#include "nn/nn.h"
#include "support/compare.h"
#include "support/gradcheck.h"
#include "support/isa.h"

using namespace ember;

namespace {

std::vector<std::string> names(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(name);
  return out;
}

// A layer run with a fixed mask, as a one-input module for gradcheck_module.
class Masked : public nn::Module {
 public:
  Masked(std::shared_ptr<nn::TransformerEncoderLayer> layer, nn::AttentionMask mask)
      : layer_(register_module("layer", std::move(layer))), mask_(std::move(mask)) {}
  Tensor forward(const Tensor& x) override { return layer_->forward(x, mask_); }
  Tensor backward(const Tensor& g) override { return layer_->backward(g); }
  std::string type_name() const override { return "Masked"; }

 private:
  std::shared_ptr<nn::TransformerEncoderLayer> layer_;
  nn::AttentionMask mask_;
};

// Parameters moved off their initial values (zero biases and unit norms would hide a missing term), in float64.
void randomise(nn::Module& m, uint64_t seed) {
  for (const auto& p : m.parameters()) p->value.copy_from(Tensor::rand(p->value.shape(), seed++, DType::F64,
                                                                       Device::cpu(), -0.6, 0.6));
}

const std::vector<std::string> kLayerNames = {
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
    "linear1.weight",           "linear1.bias",           "linear2.weight",            "linear2.bias",
    "norm1.weight",             "norm1.bias",             "norm2.weight",              "norm2.bias"};

}  // namespace

TEST_CASE("MultiheadAttention has PyTorch's parameters and initial values", "[nn][transformer]") {
  nn::MultiheadAttention mha(8, 2);
  CHECK(names(mha) == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  CHECK(mha.in_proj_weight()->value.shape() == Shape{24, 8});
  CHECK(mha.in_proj_bias()->value.to_vector<float>() == std::vector<float>(24, 0.0f));
  CHECK(mha.out_proj().bias()->value.to_vector<float>() == std::vector<float>(8, 0.0f));
  // xavier_uniform over (3E, E): |w| < sqrt(6 / (E + 3E)).
  for (float w : mha.in_proj_weight()->value.to_vector<float>()) CHECK(std::fabs(w) < std::sqrt(6.0f / 32.0f));
  CHECK_THROWS_WITH(nn::MultiheadAttention(64, 5),
                    "MultiheadAttention: embed_dim 64 is not divisible by num_heads 5; choose a head count that divides it");
}

TEST_CASE("MultiheadAttention passes the float64 gradient check, batch first or not", "[nn][transformer]") {
  for (bool batch_first : {true, false}) {
    INFO("batch_first " << batch_first);
    nn::MultiheadAttention mha(6, 2, 0.0, true, batch_first, DType::F64);
    randomise(mha, 40);
    test::gradcheck_module(mha, Tensor::randn({2, 4, 6}, 41, DType::F64));
  }
}

TEST_CASE("TransformerEncoderLayer has PyTorch's names and passes the gradient check in every form",
          "[nn][transformer]") {
  struct Form {
    bool norm_first;
    const char* activation;
    bool causal, padding;
  };
  for (const Form f : {Form{false, "relu", false, false}, Form{true, "gelu", false, false},
                       Form{false, "gelu", true, false}, Form{true, "relu", true, true},
                       Form{false, "relu", false, true}}) {
    INFO("norm_first " << f.norm_first << " " << f.activation << " causal " << f.causal << " padding " << f.padding);
    const nn::TransformerEncoderLayerOptions o{.d_model = 6, .nhead = 2, .dim_feedforward = 10, .dropout = 0.0,
                                               .activation = f.activation, .batch_first = true,
                                               .norm_first = f.norm_first};
    auto layer = std::make_shared<nn::TransformerEncoderLayer>(o, DType::F64);
    CHECK(names(*layer) == kLayerNames);
    randomise(*layer, 50);
    nn::AttentionMask mask{Tensor(), f.causal};
    // Sequence 0 pads its last key, sequence 1 nothing.
    if (f.padding) mask.key_padding_mask = Tensor::from_vector<uint8_t>({0, 0, 0, 1, 0, 0, 0, 0}, {2, 4});
    Masked masked(layer, mask);
    test::gradcheck_module(masked, Tensor::randn({2, 4, 6}, 51, DType::F64));
  }
}

TEST_CASE("TransformerEncoder stacks layers under layers.N with an optional final norm", "[nn][transformer]") {
  const nn::TransformerEncoderLayerOptions o{.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0,
                                             .activation = "gelu", .batch_first = true, .norm_first = true};
  nn::TransformerEncoder encoder(o, 2, true, DType::F64);
  const std::vector<std::string> got = names(encoder);
  REQUIRE(got.size() == 2 * kLayerNames.size() + 2);
  CHECK(got.front() == "layers.0.self_attn.in_proj_weight");
  CHECK(got[kLayerNames.size()] == "layers.1.self_attn.in_proj_weight");
  CHECK(got.back() == "norm.bias");
  // PyTorch's _get_clones: the layers start as copies of one layer.
  const auto sd = encoder.state_dict();
  for (size_t i = 0; i < kLayerNames.size(); ++i) {
    INFO(sd[i].first);
    CHECK(sd[i].second.to_vector<double>() == sd[kLayerNames.size() + i].second.to_vector<double>());
  }
  randomise(encoder, 60);
  test::gradcheck_module(encoder, Tensor::randn({2, 3, 4}, 61, DType::F64));
}

TEST_CASE("Dropout in a TransformerEncoderLayer changes training outputs and nothing in eval", "[nn][transformer]") {
  const nn::TransformerEncoderLayerOptions o{.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.5,
                                             .batch_first = true};
  Generator generator(3);
  nn::TransformerEncoderLayer layer(o, DType::F32, Device::cpu(), generator);
  const Tensor x = Tensor::randn({2, 5, 8}, 62);
  layer.eval();
  const std::vector<float> a = layer.forward(x).to_vector<float>();
  CHECK(layer.forward(x).to_vector<float>() == a);
  layer.train();
  CHECK(layer.forward(x).to_vector<float>() != a);
}

TEST_CASE("TransformerEncoderLayer refuses bad options and inputs with one-line errors", "[nn][transformer]") {
  CHECK_THROWS_AS(nn::TransformerEncoderLayer({.d_model = 8, .nhead = 3}), ValueError);
  CHECK_THROWS_WITH(nn::TransformerEncoderLayer({.d_model = 8, .nhead = 2, .activation = "tanh"}),
                    "TransformerEncoderLayer: activation must be \"relu\" or \"gelu\", got \"tanh\"");
  nn::TransformerEncoderLayer layer({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .batch_first = true});
  CHECK_THROWS_WITH(layer.forward(Tensor::zeros({2, 5, 6})),
                    Catch::Contains("expects input with 8 features in the last dim, but got shape [2, 5, 6]"));
  CHECK_THROWS_AS(layer.backward(Tensor::zeros({2, 5, 8})), ValueError);  // no forward yet
  CHECK_THROWS_AS(layer.forward(Tensor::zeros({2, 5, 8}, DType::F32, Device::meta())), DeviceMismatchError);
}

TEST_CASE("The ViT has the peer module's names and passes the float64 gradient check", "[nn][transformer][vit]") {
  models::Architecture arch = models::Architecture::vit(7, 8, 2, 2, 12);
  arch.dropout = 0;
  Generator generator(4);
  models::VisionTransformer vit(arch, Device::cpu(), generator);
  const std::vector<std::string> got = names(vit);
  REQUIRE(got.size() == 4 + 2 * kLayerNames.size() + 4);
  CHECK(std::vector<std::string>(got.begin(), got.begin() + 4) ==
        std::vector<std::string>{"class_token", "pos_embedding", "patch_embed.weight", "patch_embed.bias"});
  CHECK(got[4] == "encoder.layers.0.self_attn.in_proj_weight");
  CHECK(std::vector<std::string>(got.end() - 4, got.end()) ==
        std::vector<std::string>{"norm.weight", "norm.bias", "head.weight", "head.bias"});
  CHECK(vit.forward(Tensor::rand({3, 1, 28, 28}, 5)).shape() == Shape{3, 10});
  vit.to(DType::F64);
  randomise(vit, 70);
  test::gradcheck_module(vit, Tensor::rand({2, 1, 28, 28}, 71, DType::F64), false);
  CHECK_THROWS_AS(vit.set_input_grad(true), ValueError);
  CHECK_THROWS_WITH(vit.forward(Tensor::zeros({2, 1, 27, 27}, DType::F64)),
                    Catch::Contains("expects images of shape [2, 1, 28, 28], but got [2, 1, 27, 27]"));
}

namespace {

// A fresh layer's output, input gradient and parameter gradients, seeded the same each time.
std::vector<std::vector<double>> layer_results(DType dtype, bool norm_first, bool causal) {
  Generator gen(11);
  nn::TransformerEncoderLayer layer({.d_model = 32, .nhead = 4, .dim_feedforward = 48, .dropout = 0.1,
                                     .activation = "gelu", .layer_norm_eps = 1e-5, .batch_first = true,
                                     .norm_first = norm_first},
                                    dtype, Device::cpu(), gen);
  const Tensor x = Tensor::randn({3, 13, 32}, 12, dtype), dy = Tensor::randn({3, 13, 32}, 13, dtype);
  std::vector<std::vector<double>> out;
  out.push_back(layer.forward(x, {Tensor(), causal}).to(DType::F64).to_vector<double>());
  out.push_back(layer.backward(dy).to(DType::F64).to_vector<double>());
  for (const auto& p : layer.parameters()) out.push_back(p->grad.to(DType::F64).to_vector<double>());
  return out;
}

}  // namespace

TEST_CASE("A Transformer layer gives the same bits in the AVX-512 and the baseline builds of its kernels",
          "[nn][transformer]") {
  using kernels::cpu::HostIsa;
  if (!kernels::cpu::host_isa_available(HostIsa::avx512)) {
    WARN("this CPU or build has no AVX-512: only the baseline build runs here");
    return;
  }
  for (DType dtype : {DType::F32, DType::F64})
    for (bool norm_first : {false, true})
      for (bool causal : {false, true}) {
        INFO("dtype " << dtype_name(dtype) << " norm_first " << norm_first << " causal " << causal);
        std::vector<std::vector<double>> want, got;
        {
          test::IsaScope scope(HostIsa::baseline);
          want = layer_results(dtype, norm_first, causal);
        }
        {
          test::IsaScope scope(HostIsa::avx512);
          got = layer_results(dtype, norm_first, causal);
        }
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < want.size(); ++i) {  // doubles made from the same floats: the same bytes
          REQUIRE(got[i].size() == want[i].size());
          CHECK(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(double)) == 0);
        }
      }
}
