// nn::Embedding: PyTorch's parameter name and N(0, 1) initialisation from the generator, rows of the weight out,
// the float64 gradient check of the weight, the backward contract (grads add up, nothing returned for the ids),
// .to(device) and the device mismatch it then reports, and the argument and input errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "nn/nn.h"
#include "support/gradcheck.h"

using namespace ember;

TEST_CASE("Embedding has PyTorch's parameter `weight` (V, E), drawn N(0, 1) from the generator", "[nn][embedding]") {
  Generator gen(5);
  nn::Embedding emb(200, 30, DType::F64, Device::cpu(), gen);
  const auto state = emb.state_dict();
  REQUIRE(state.size() == 1);
  CHECK(state[0].first == "weight");
  CHECK(state[0].second.shape() == Shape{200, 30});
  CHECK((emb.num_embeddings() == 200 && emb.embedding_dim() == 30));
  const std::vector<double> w = emb.weight()->value.to_vector<double>();
  double mean = 0, var = 0;
  for (double v : w) mean += v / static_cast<double>(w.size());
  for (double v : w) var += (v - mean) * (v - mean) / static_cast<double>(w.size());
  CHECK(std::fabs(mean) < 0.05);  // 6000 draws: the standard error is 0.013
  CHECK(std::fabs(std::sqrt(var) - 1) < 0.05);
  // The same seed draws the same table; the generator moved on, so the next one differs.
  Generator again(5);
  CHECK(nn::Embedding(200, 30, DType::F64, Device::cpu(), again).weight()->value.to_vector<double>() == w);
  CHECK(nn::Embedding(200, 30, DType::F64, Device::cpu(), gen).weight()->value.to_vector<double>() != w);
  nn::Sequential seq(std::make_shared<nn::Embedding>(10, 4), std::make_shared<nn::Linear>(4, 2));
  std::vector<std::string> names;
  for (const auto& [name, t] : seq.state_dict()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"0.weight", "1.weight", "1.bias"});
}

TEST_CASE("Embedding's forward gives the weight's rows, and its backward adds to weight.grad only", "[nn][embedding]") {
  nn::Embedding emb(6, 3, DType::F64);
  const Tensor ids = Tensor::from_vector<int32_t>({4, 0, 4, 5}, {2, 2});
  const Tensor y = emb.forward(ids);
  REQUIRE(y.shape() == Shape{2, 2, 3});
  const std::vector<double> w = emb.weight()->value.to_vector<double>(), out = y.to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t c = 0; c < 3; ++c) CHECK(out[i * 3 + c] == w[std::vector<int64_t>{4, 0, 4, 5}[i] * 3 + c]);
  emb.zero_grad();
  const Tensor dy = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
  CHECK(!emb.backward(dy).defined());  // integer ids have no gradient
  CHECK(!emb.backward(dy).defined());  // a second backward adds again
  CHECK(emb.weight()->grad.to_vector<double>() ==
        std::vector<double>{8, 10, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 20, 24, 20, 22, 24});
  CHECK(!emb.input_grad());
  emb.set_input_grad(true);  // ignored: there is still nothing to return for the ids
  CHECK(!emb.input_grad());
  emb.zero_grad();
  CHECK(ops::sum(emb.weight()->grad).item<double>() == 0);
}

TEST_CASE("Embedding passes the float64 gradient check of its weight", "[nn][embedding]") {
  nn::Embedding emb(5, 4, DType::F64);
  const Tensor ids = Tensor::from_vector<int64_t>({3, 1, 3, 3, 0, 1}, {3, 2});
  emb.zero_grad();
  const Tensor r = Tensor::randn({3, 2, 4}, 17, DType::F64);
  emb.forward(ids);
  emb.backward(r);
  Tensor& w = emb.weight()->value;
  auto f = [&](const std::vector<double>& v) {
    const Tensor saved = w.clone();
    w.copy_from(Tensor::from_vector(v, w.shape()));
    const double s = ops::sum(ops::mul(emb.forward(ids), r)).item<double>();
    w.copy_from(saved);
    return s;
  };
  REQUIRE_GRADCHECK(f, w.to_vector<double>(), emb.weight()->grad.to_vector<double>());
}

TEST_CASE("Embedding moves with .to(device) and names both devices when the ids stay behind", "[nn][embedding]") {
  nn::Embedding emb(8, 3);
  const nn::ParameterPtr weight = emb.weight();
  emb.to(Device::meta());
  CHECK(weight->value.device().is_meta());  // moved in place: a held reference sees it
  CHECK(weight->grad.device().is_meta());
  CHECK_THROWS_WITH(emb.forward(Tensor::zeros({2}, DType::I64)),
                    "Expected all tensors to be on the same device, but model (Embedding) got ids on cpu and its "
                    "weight on meta. Move the ids with .to(meta) inside the training loop, or the model with .to(cpu).");
  const Tensor y = emb.forward(Tensor::empty({2, 7}, DType::I64, Device::meta()));
  CHECK((y.device().is_meta() && y.shape() == Shape{2, 7, 3}));
}

TEST_CASE("Embedding refuses bad sizes, ids and gradients with one-line errors", "[nn][embedding]") {
  CHECK_THROWS_AS(nn::Embedding(0, 3), ValueError);
  CHECK_THROWS_AS(nn::Embedding(3, -1), ValueError);
  nn::Embedding emb(4, 2);
  CHECK_THROWS_AS(emb.backward(Tensor::ones({2, 2})), ValueError);  // no forward yet
  CHECK_THROWS_WITH(emb.forward(Tensor::from_vector<int64_t>({1, 4}, {2})),
                    Catch::StartsWith("embedding(): id 4 at position 1 of ids (flattened) is out of range for 4 "
                                      "embeddings (valid ids are 0..3)"));
  CHECK_THROWS_AS(emb.forward(Tensor::ones({2})), DTypeError);
  emb.forward(Tensor::from_vector<int64_t>({1, 3}, {2}));
  CHECK_THROWS_WITH(emb.backward(Tensor::ones({2, 5})),
                    Catch::Contains("(Embedding) expects input with 2 features in the last dim, but got shape [2, 5]"));
  CHECK_THROWS_AS(emb.backward(Tensor::ones({3, 2})), ShapeError);  // one row per id
}
