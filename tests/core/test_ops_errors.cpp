// Every op of core/ops.h refuses a device mismatch, a shape mismatch and a dtype mismatch with the
// typed error (meta tensors stand in for a second device on machines without a GPU).
#include <catch2/catch.hpp>

#include <functional>

#include "core/ops.h"

using namespace ember;

namespace {

Tensor on(Shape s, Device d = Device::cpu(), DType t = DType::F32) { return Tensor::ones(s, t, d); }
Tensor meta(Shape s, DType t = DType::F32) { return Tensor::empty(s, t, Device::meta()); }
Tensor labels(int64_t n, Device d = Device::cpu()) { return Tensor::zeros({n}, DType::I64, d); }

struct OpCase {
  const char* name;
  std::function<void()> device_mismatch, shape_mismatch, dtype_mismatch;
};

}  // namespace

TEST_CASE("Every op throws the typed error for device, shape and dtype mismatches", "[core]") {
  Tensor state = on({4, 3}), m = on({4, 3}), v = on({4, 3});
  std::vector<OpCase> cases = {
      {"matmul", [] { ops::matmul(on({2, 3}), meta({3, 4})); }, [] { ops::matmul(on({2, 3}), on({2, 4})); },
       [] { ops::matmul(on({2, 3}), on({3, 4}, Device::cpu(), DType::F64)); }},
      {"matmul_",
       [] { Tensor out = on({2, 4}); ops::matmul_(out, on({2, 3}), meta({3, 4}), false, false); },
       [] { Tensor out = on({2, 5}); ops::matmul_(out, on({2, 3}), on({3, 4}), false, false); },
       [] { Tensor out = on({2, 4}, Device::cpu(), DType::F64); ops::matmul_(out, on({2, 3}), on({3, 4}), false, false); }},
      {"linear_backward",
       [] { Tensor gw = on({4, 3}); ops::linear_backward(on({2, 4}), on({2, 3}), meta({4, 3}), gw, true); },
       [] { Tensor gw = on({4, 3}); ops::linear_backward(on({2, 4}), on({2, 3}), on({4, 5}), gw, true); },
       [] { Tensor gw = on({4, 3}, Device::cpu(), DType::F64); ops::linear_backward(on({2, 4}), on({2, 3}), on({4, 3}), gw, true); }},
      {"linear", [] { ops::linear(meta({2, 3}), on({4, 3}), on({4})); },
       [] { ops::linear(on({2, 3}), on({4, 5}), on({4})); },
       [] { ops::linear(on({2, 3}), on({4, 3}), on({4}, Device::cpu(), DType::F64)); }},
      {"sum_rows_",
       [] { Tensor out = meta({3}); ops::sum_rows_(out, on({2, 3}), 0); },
       [] { Tensor out = on({4}); ops::sum_rows_(out, on({2, 3}), 0); },
       [] { Tensor out = on({3}, Device::cpu(), DType::F64); ops::sum_rows_(out, on({2, 3}), 0); }},
      {"count_correct", [] { ops::count_correct(on({2, 3}), labels(2, Device::meta())); },
       [] { ops::count_correct(on({2, 3}), labels(3)); },
       [] { ops::count_correct(on({2, 3}), on({2})); }},
      {"softmax_backward", [] { ops::softmax_backward(on({2, 3}), meta({2, 3})); },
       [] { ops::softmax_backward(on({2, 3}), on({3, 2})); },
       [] { ops::softmax_backward(on({2, 3}), on({2, 3}, Device::cpu(), DType::F64)); }},
      {"log_softmax_backward", [] { ops::log_softmax_backward(meta({2, 3}), on({2, 3})); },
       [] { ops::log_softmax_backward(on({2, 3}), on({2, 4})); },
       [] { ops::log_softmax_backward(on({2, 3}), on({2, 3}, Device::cpu(), DType::F64)); }},
      {"cross_entropy", [] { ops::cross_entropy(on({2, 3}), labels(2, Device::meta())); },
       [] { ops::cross_entropy(on({2, 3}), labels(5)); },
       [] { ops::cross_entropy(on({2, 3}), on({2})); }},
      {"cross_entropy_backward", [] { ops::cross_entropy_backward(meta({2, 3}), labels(2)); },
       [] { ops::cross_entropy_backward(on({2, 3}), labels(1)); },
       [] { ops::cross_entropy_backward(on({2, 3}, Device::cpu(), DType::I32), labels(2)); }},
      {"sgd_step_",
       [] { Tensor p = on({4, 3}); Tensor buf; ops::sgd_step_(p, meta({4, 3}), buf, {}, false); },
       [] { Tensor p = on({4, 3}); Tensor buf; ops::sgd_step_(p, on({3, 4}), buf, {}, false); },
       [] { Tensor p = on({4, 3}); Tensor buf; ops::sgd_step_(p, on({4, 3}, Device::cpu(), DType::F64), buf, {}, false); }},
      {"adamw_step_",
       [] { Tensor p = on({4, 3}), a = meta({4, 3}), b = on({4, 3}); ops::adamw_step_(p, on({4, 3}), a, b, {}, 1); },
       [] { Tensor p = on({4, 3}), a = on({4, 2}), b = on({4, 3}); ops::adamw_step_(p, on({4, 3}), a, b, {}, 1); },
       [] { Tensor p = on({4, 3}), a = on({4, 3}, Device::cpu(), DType::F64), b = on({4, 3}); ops::adamw_step_(p, on({4, 3}), a, b, {}, 1); }},
      {"cast_", [] { Tensor out = meta({4}); ops::cast_(out, on({4})); },
       [] { Tensor out = on({5}); ops::cast_(out, on({4})); }, nullptr},
      {"add_bias", [] { ops::add_bias(on({2, 3}), meta({3})); }, [] { ops::add_bias(on({2, 3}), on({2})); },
       [] { ops::add_bias(on({2, 3}), on({3}, Device::cpu(), DType::F64)); }},
      {"layer_norm", [] { ops::layer_norm(on({2, 3}), meta({3}), on({3})); },
       [] { ops::layer_norm(on({2, 3}), on({3}), on({2})); },
       [] { ops::layer_norm(on({2, 3}), on({3}, Device::cpu(), DType::F64), on({3})); }},
      {"layer_norm_backward",
       [] { Tensor gw = on({3}), gb = on({3}); ops::layer_norm_backward(on({2, 3}), on({2, 3}), on({3}), {Tensor(), on({2}), meta({2})}, gw, gb); },
       [] { Tensor gw = on({4}), gb = on({3}); ops::layer_norm_backward(on({2, 3}), on({2, 3}), on({3}), {Tensor(), on({2}), on({2})}, gw, gb); },
       [] { Tensor gw = on({3}), gb = on({3}, Device::cpu(), DType::F64); ops::layer_norm_backward(on({2, 3}), on({2, 3}), on({3}), {Tensor(), on({2}), on({2})}, gw, gb); }},
      {"gelu_backward", [] { ops::gelu_backward(on({2, 3}), meta({2, 3})); },
       [] { ops::gelu_backward(on({2, 3}), on({3, 2})); },
       [] { ops::gelu_backward(on({2, 3}), on({2, 3}, Device::cpu(), DType::F64)); }},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    CHECK_THROWS_AS(c.device_mismatch(), DeviceMismatchError);
    CHECK_THROWS_WITH(c.device_mismatch(), Catch::StartsWith("Expected all tensors to be on the same device") &&
                                               Catch::Contains(c.name));
    CHECK_THROWS_AS(c.shape_mismatch(), ShapeError);
    if (c.dtype_mismatch) CHECK_THROWS_AS(c.dtype_mismatch(), DTypeError);
  }
  // Single-input ops have no device to mismatch; their dtype and shape checks:
  CHECK_THROWS_AS(ops::softmax(on({2, 3}, Device::cpu(), DType::I64)), DTypeError);
  CHECK_THROWS_AS(ops::softmax(on({6})), ShapeError);
  CHECK_THROWS_AS(ops::argmax(on({6})), ShapeError);
  CHECK_THROWS_AS(ops::argmax(on({2, 3}, Device::cpu(), DType::U8)), DTypeError);
  CHECK_THROWS_AS(ops::sum(on({2}, Device::cpu(), DType::I32)), DTypeError);
  CHECK_THROWS_AS(ops::sum_rows(on({6})), ShapeError);
  CHECK_THROWS_AS(ops::gelu(on({2, 3}, Device::cpu(), DType::I32)), DTypeError);
  CHECK_THROWS_AS(ops::layer_norm(on({2, 0}), Tensor(), Tensor()), ShapeError);
}

TEST_CASE("Ops on meta tensors infer shapes without touching memory", "[core]") {
  CHECK(ops::matmul(meta({5, 3}), meta({4, 3}), false, true).shape() == Shape{5, 4});
  CHECK(ops::linear(meta({8, 784}), meta({256, 784}), meta({256}), true).shape() == Shape{8, 256});
  CHECK(ops::cross_entropy(meta({8, 10}), Tensor::empty({8}, DType::I64, Device::meta())).loss.dim() == 0);
  CHECK(ops::argmax(meta({8, 10})).dtype() == DType::I64);
  CHECK(ops::sum_rows(meta({8, 10})).shape() == Shape{10});
}
