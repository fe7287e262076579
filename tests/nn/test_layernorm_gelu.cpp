// nn::LayerNorm and nn::GELU: PyTorch's parameter names and defaults, float64 gradient checks of the input and
// every parameter (3-d input, with and without affine; both GELU forms), values PyTorch's layer_norm gives,
// gradients that accumulate, and the input and argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "nn/nn.h"
#include "support/compare.h"
#include "support/gradcheck.h"

using namespace ember;

namespace {

std::vector<std::string> names(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("LayerNorm has PyTorch's parameters: weight (ones) and bias (zeros), none without affine", "[nn][layernorm]") {
  nn::LayerNorm norm(6);
  CHECK(names(norm) == std::vector<std::string>{"weight", "bias"});
  CHECK(norm.weight()->value.to_vector<float>() == std::vector<float>(6, 1.0f));
  CHECK(norm.bias()->value.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(norm.eps() == 1e-5);
  CHECK(names(nn::LayerNorm(6, 1e-5, false)).empty());
  nn::Sequential seq(std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::LayerNorm>(6),
                     std::make_shared<nn::GELU>("tanh"));
  CHECK(names(seq) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
}

TEST_CASE("LayerNorm passes the float64 gradient check on a 3-d input", "[nn][layernorm]") {
  for (bool affine : {true, false}) {
    INFO("elementwise_affine " << affine);
    nn::LayerNorm norm(5, 1e-5, affine, DType::F64);
    if (affine) {
      norm.weight()->value.copy_from(Tensor::rand({5}, 31, DType::F64, Device::cpu(), 0.5, 1.5));
      norm.bias()->value.copy_from(Tensor::rand({5}, 32, DType::F64, Device::cpu(), -0.5, 0.5));
    }
    test::gradcheck_module(norm, Tensor::randn({2, 3, 5}, 33, DType::F64));
  }
}

TEST_CASE("GELU passes the float64 gradient check in both forms", "[nn][gelu]") {
  for (const char* approximate : {"none", "tanh"}) {
    INFO("approximate " << approximate);
    nn::GELU gelu(approximate);
    CHECK(gelu.approximate() == approximate);
    test::gradcheck_module(gelu, ops::scale(Tensor::randn({3, 7}, 34, DType::F64), 2.0));
  }
}

TEST_CASE("LayerNorm gives PyTorch's layer_norm values and accumulates its parameter gradients", "[nn][layernorm]") {
  // F.layer_norm([[1, 2, 3, 4], [-2, 0, 0, 6]], (4,)): mean, biased variance, eps 1e-5 inside the root.
  nn::LayerNorm norm(4, 1e-5, true, DType::F64);
  const Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, -2, 0, 0, 6}, {2, 4});
  std::vector<double> want;
  for (const auto& row : {std::vector<double>{1, 2, 3, 4}, std::vector<double>{-2, 0, 0, 6}}) {
    const double mean = (row[0] + row[1] + row[2] + row[3]) / 4;
    double var = 0;
    for (double v : row) var += (v - mean) * (v - mean) / 4;
    for (double v : row) want.push_back((v - mean) / std::sqrt(var + 1e-5));
  }
  REQUIRE_CLOSE(norm.forward(x).to_vector<double>(), want, test::kF64);
  CHECK(std::fabs(want[0] + 1.3416353) < 1e-6);  // PyTorch prints -1.3416 for the first element
  // dbias = column sums of dy; a second backward adds the same again.
  norm.zero_grad();
  const Tensor dy = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  norm.backward(dy);
  norm.forward(x);
  norm.backward(dy);
  CHECK(norm.bias()->grad.to_vector<double>() == std::vector<double>{12, 16, 20, 24});
}

TEST_CASE("LayerNorm and GELU refuse bad arguments and inputs with one-line errors", "[nn][layernorm][gelu]") {
  CHECK_THROWS_AS(nn::LayerNorm(0), ValueError);
  CHECK_THROWS_AS(nn::LayerNorm(4, -1.0), ValueError);
  CHECK_THROWS_AS(nn::GELU("exact"), ValueError);
  nn::LayerNorm norm(4);
  CHECK_THROWS_AS(norm.backward(Tensor::ones({2, 4})), ValueError);  // no forward yet
  CHECK_THROWS_WITH(norm.forward(Tensor::ones({2, 5})),
                    Catch::Contains("(LayerNorm) expects input with 4 features in the last dim, but got shape [2, 5]"));
  CHECK_THROWS_AS(norm.forward(Tensor::ones({2, 4}, DType::F32, Device::meta())), DeviceMismatchError);
  nn::GELU gelu;
  CHECK(gelu.approximate() == "none");
  CHECK_THROWS_AS(gelu.backward(Tensor::ones({2})), ValueError);
}
