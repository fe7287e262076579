// The byte-level BERT (models/bert.h): the peer module's state_dict names and parameter count, float64 gradient
// checks through every position and through chosen positions only, the chosen-position path equal to the full one,
// and its errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/ops.h"
#include "models/bert.h"
#include "support/compare.h"
#include "support/gradcheck.h"

using namespace ember;

namespace {

// The model read at fixed positions only, as a one-input module for gradcheck_module.
class AtPositions : public nn::Module {
 public:
  AtPositions(std::shared_ptr<models::BertMaskedLM> bert, Tensor positions)
      : bert_(register_module("bert", std::move(bert))), positions_(std::move(positions)) {}
  Tensor forward(const Tensor& ids) override { return bert_->forward(ids, positions_); }
  Tensor backward(const Tensor& g) override { return bert_->backward(g); }
  std::string type_name() const override { return "AtPositions"; }

 private:
  std::shared_ptr<models::BertMaskedLM> bert_;
  Tensor positions_;
};

// A small BERT in float64 with parameters moved off their initial values (zero biases and unit norms would hide a
// missing term), dropout off.
std::shared_ptr<models::BertMaskedLM> small_bert(uint64_t seed) {
  models::Architecture arch = models::Architecture::bert(6, 8, 2, 2, 12);
  arch.dropout = 0;
  Generator generator(seed);
  auto bert = std::make_shared<models::BertMaskedLM>(arch, Device::cpu(), generator);
  bert->to(DType::F64);
  for (const auto& p : bert->parameters())
    p->value.copy_from(Tensor::rand(p->value.shape(), seed++, DType::F64, Device::cpu(), -0.6, 0.6));
  return bert;
}

const Tensor kIds = Tensor::from_vector<int64_t>({72, 256, 108, 108, 111, 3, 256, 0, 255, 32}, {2, 5});

}  // namespace

TEST_CASE("BERT has the peer module's names and parameter count", "[nn][transformer][bert]") {
  Generator generator(1);
  models::BertMaskedLM bert(models::Architecture::bert(64, 128, 4, 4, 512), Device::cpu(), generator);
  std::vector<std::string> names;
  for (const auto& [name, t] : bert.state_dict()) names.push_back(name);
  REQUIRE(names.size() == 4 + 4 * 12 + 6);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 4) ==
        std::vector<std::string>{"pos", "tok.weight", "emb_norm.weight", "emb_norm.bias"});  // PyTorch's order
  CHECK(names[4] == "encoder.layers.0.self_attn.in_proj_weight");
  CHECK(std::vector<std::string>(names.end() - 6, names.end()) ==
        std::vector<std::string>{"head.0.weight", "head.0.bias", "head.2.weight", "head.2.bias", "head.3.weight",
                                 "head.3.bias"});
  int64_t count = 0;
  for (const auto& p : bert.parameters()) count += p->value.numel();
  CHECK(count == 884353);  // torch_bert.py prints params=884353
  // BERT's N(0, 0.02) tables, not nn.Embedding's N(0, 1).
  for (int table : {0, 1}) {
    const std::vector<float> v = bert.state_dict()[table].second.to_vector<float>();
    double sum = 0, sq = 0;
    for (float x : v) sum += x, sq += double(x) * x;
    INFO(bert.state_dict()[table].first);
    CHECK(std::fabs(sum / double(v.size())) < 0.001);
    CHECK(std::sqrt(sq / double(v.size())) == Approx(0.02).epsilon(0.05));
  }
}

TEST_CASE("BERT passes the float64 gradient check at every position, shorter than its table", "[nn][transformer][bert]") {
  auto bert = small_bert(30);
  CHECK(bert->forward(kIds).shape() == Shape{2, 5, 257});
  test::gradcheck_module(*bert, kIds, false);
}

TEST_CASE("BERT at chosen positions equals the full head there and passes the gradient check", "[nn][transformer][bert]") {
  auto bert = small_bert(40);
  const Tensor positions = Tensor::from_vector<int64_t>({1, 4, 6, 9}, {4});
  const Tensor full = bert->forward(kIds).view({10, 257});
  const Tensor chosen = bert->forward(kIds, positions);
  REQUIRE_CLOSE(chosen.to_vector<double>(), ops::embedding(full, positions).to_vector<double>(), test::kF64);
  // The gradients of the chosen rows equal those of the full head with zeros elsewhere.
  const Tensor g = Tensor::randn({4, 257}, 9, DType::F64);
  bert->zero_grad();
  bert->forward(kIds, positions);
  bert->backward(g);
  std::vector<Tensor> grads;
  for (const auto& p : bert->parameters()) grads.push_back(p->grad.clone());
  Tensor g_full = Tensor::zeros({10, 257}, DType::F64);
  ops::embedding_backward_(g_full, g, positions);
  bert->zero_grad();
  bert->forward(kIds);
  bert->backward(g_full.view({2, 5, 257}));
  for (size_t i = 0; i < grads.size(); ++i)
    REQUIRE_CLOSE(grads[i].to_vector<double>(), bert->parameters()[i]->grad.to_vector<double>(), test::kF64);
  AtPositions at(bert, positions);
  test::gradcheck_module(at, kIds, false);
}

TEST_CASE("BERT refuses windows longer than its position table and an input gradient", "[nn][transformer][bert]") {
  auto bert = small_bert(50);
  CHECK_THROWS_WITH(bert->forward(Tensor::zeros({1, 7}, DType::I64)),
                    Catch::Contains("a window of 7 tokens is longer than the position table (6)"));
  CHECK_THROWS_AS(bert->forward(Tensor::zeros({7}, DType::I64)), ShapeError);
  CHECK_THROWS_WITH(bert->forward(Tensor::from_vector<int64_t>({257}, {1, 1})), Catch::Contains("257"));
  CHECK_THROWS_AS(bert->set_input_grad(true), ValueError);
}
