// Every op's argument checks: device mismatch (with meta tensors standing in for a second device),
// dtype and shape errors, each with the message the user needs.
#include <catch2/catch.hpp>

#include "core/ops.h"
#include "support/data.h"

using namespace ember;

namespace {
Tensor cpu_f32(Shape s) { return Tensor::ones(s); }
Tensor meta_f32(Shape s) { return Tensor::empty(s, DType::F32, Device::meta()); }
}  // namespace

TEST_CASE("A device mismatch names the op, each argument's device and the fix", "[core]") {
  Tensor a = cpu_f32({2, 3}), b = meta_f32({2, 3});
  CHECK_THROWS_AS(ops::add(a, b), DeviceMismatchError);
  CHECK_THROWS_WITH(ops::add(a, b),
                    "Expected all tensors to be on the same device, but add() got self on cpu and other on meta. "
                    "Move self with .to(meta), or other with .to(cpu).");
  CHECK_THROWS_AS(ops::sub(b, a), DeviceMismatchError);
  CHECK_THROWS_AS(ops::mul(a, b), DeviceMismatchError);
  CHECK_THROWS_AS(ops::relu_backward(a, b), DeviceMismatchError);
  Tensor bias = Tensor::ones({3}, DType::F32, Device::meta());
  CHECK_THROWS_WITH(ops::add_bias(a, bias), Catch::StartsWith("Expected all tensors to be on the same device, but "
                                                              "add_bias() got input on cpu and bias on meta."));
  Tensor self = cpu_f32({2, 3});
  CHECK_THROWS_AS(ops::add_(self, b), DeviceMismatchError);
}

TEST_CASE("The device check runs before anything else and touches no memory", "[core]") {
  // Wrong device AND wrong shape AND wrong dtype: the device is reported first.
  Tensor a = Tensor::ones({2}, DType::F64), b = Tensor::empty({5}, DType::F32, Device::meta());
  CHECK_THROWS_AS(ops::add(a, b), DeviceMismatchError);
  Tensor self = Tensor::ones({2}, DType::F64);
  CHECK_THROWS_AS(ops::add_(self, b), DeviceMismatchError);
  CHECK(self.to_vector<double>() == std::vector<double>{1, 1});
}

TEST_CASE("Shape and dtype errors name the op, the arguments and their values", "[core]") {
  Tensor a = cpu_f32({2, 3}), b = cpu_f32({3, 2});
  CHECK_THROWS_AS(ops::add(a, b), ShapeError);
  CHECK_THROWS_WITH(ops::add(a, b),
                    "add() expects self and other of the same shape, but got self [2, 3] and other [3, 2]");
  Tensor d = Tensor::ones({2, 3}, DType::F64);
  CHECK_THROWS_AS(ops::mul(a, d), DTypeError);
  CHECK_THROWS_WITH(ops::mul(a, d), Catch::Contains("mul() expects tensors of one dtype, but self is float32, "
                                                    "other is float64"));
  Tensor i = Tensor::ones({2, 3}, DType::I32);
  CHECK_THROWS_AS(ops::add(i, i), DTypeError);
  CHECK_THROWS_AS(ops::relu(i), DTypeError);
  CHECK_THROWS_AS(ops::add_bias(a, cpu_f32({2})), ShapeError);
  CHECK_THROWS_AS(ops::add_bias(cpu_f32({6}), cpu_f32({6})), ShapeError);
  CHECK_THROWS_AS(ops::add(Tensor(), a), ValueError);
  // Meta tensors get the same shape checks as real ones.
  CHECK_THROWS_AS(ops::add(meta_f32({2}), meta_f32({3})), ShapeError);
  CHECK(ops::add(meta_f32({4, 5}), meta_f32({4, 5})).shape() == Shape{4, 5});
}

TEST_CASE("Elementwise ops compute the right values on the host", "[core]") {
  Tensor a = Tensor::from_vector<float>({1, -2, 3, -4}, {2, 2});
  Tensor b = Tensor::from_vector<float>({10, 20, 30, 40}, {2, 2});
  CHECK((a + b).to_vector<float>() == std::vector<float>{11, 18, 33, 36});
  CHECK((b - a).to_vector<float>() == std::vector<float>{9, 22, 27, 44});
  CHECK((a * b).to_vector<float>() == std::vector<float>{10, -40, 90, -160});
  CHECK((a * 0.5).to_vector<float>() == std::vector<float>{0.5f, -1, 1.5f, -2});
  CHECK(ops::relu(a).to_vector<float>() == std::vector<float>{1, 0, 3, 0});
  CHECK(ops::relu_backward(b, ops::relu(a)).to_vector<float>() == std::vector<float>{10, 0, 30, 0});
  CHECK(ops::add_bias(a, Tensor::from_vector<float>({100, 200}, {2})).to_vector<float>() ==
        std::vector<float>{101, 198, 103, 196});
  Tensor acc = Tensor::ones({2, 2});
  ops::add_(acc, b, 0.1);
  CHECK(acc.to_vector<float>() == std::vector<float>{2, 3, 4, 5});
  // Strided inputs are read in logical order.
  CHECK((a.t() + b).to_vector<float>() == std::vector<float>{11, 23, 28, 36});
}

TEST_CASE("linear_backward gives matmul_ then matmul's bits, and no input gradient when not asked", "[core]") {
  const int64_t batch = 128, out = 256, in = 100;
  const auto values = [](int64_t n, unsigned seed) { return ember::test::random_values<float>(n, seed, -1, 1); };
  const Tensor dy = Tensor::from_vector(values(batch * out, 1), {batch, out});
  const Tensor x = Tensor::from_vector(values(batch * in, 2), {batch, in});
  const Tensor w = Tensor::from_vector(values(out * in, 3), {out, in});
  const std::vector<float> gw0 = values(out * in, 4);
  Tensor gw_apart = Tensor::from_vector(gw0, {out, in}), gw = Tensor::from_vector(gw0, {out, in});
  ops::matmul_(gw_apart, dy, x, true, false, 1, 1);
  const Tensor dx_apart = ops::matmul(dy, w);
  const Tensor dx = ops::linear_backward(dy, x, w, gw, true);
  CHECK(gw.to_vector<float>() == gw_apart.to_vector<float>());
  REQUIRE(dx.shape() == Shape({batch, in}));
  CHECK(dx.to_vector<float>() == dx_apart.to_vector<float>());
  CHECK_FALSE(ops::linear_backward(dy, x, w, gw, false).defined());
  Tensor gw_wrong = cpu_f32({in, out});
  CHECK_THROWS_WITH(ops::linear_backward(dy, x, w, gw_wrong, true),
                    Catch::Contains("expects grad_weight of shape [256, 100] like the weight"));
}
