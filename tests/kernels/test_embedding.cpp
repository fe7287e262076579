// Host embedding against its definition (int32 and int64 ids, width 1, odd widths, NaN-prefilled outputs), the float64
// gradient check of the weight with repeated ids, the backward's += and its bits at 1 and 2 threads, out-of-range
// ids refused before anything is read or written, and the op's checks in order: device, dtype, shape.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/ops.h"
#include "kernels/embedding.h"
#include "support/data.h"
#include "support/gradcheck.h"
#include "support/threads.h"

using namespace ember;

namespace {

struct Dims {
  int64_t n, V, E;
};
const std::vector<Dims> kShapes = {{1, 1, 1}, {7, 3, 1}, {33, 11, 5}, {5, 101, 37}, {64, 9, 64}, {3, 2, 768}};

// n ids in [0, V), most of them repeated (every fourth is id V / 2).
template <typename I> std::vector<I> ids_for(int64_t n, int64_t V, unsigned seed) {
  std::vector<I> ids(static_cast<size_t>(n));
  const std::vector<double> u = test::random_values<double>(n, seed, 0, static_cast<double>(V));
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<I>(i % 4 == 0 ? V / 2 : static_cast<int64_t>(u[i]));
  return ids;
}

template <typename T, typename I> void check_forward(Dims d) {
  INFO("n " << d.n << " V " << d.V << " E " << d.E);
  const auto weight = test::random_values<T>(d.V * d.E, 1, -1, 1);
  const auto ids = ids_for<I>(d.n, d.V, 2);
  auto out = test::nans<T>(d.n * d.E);
  kernels::cpu::embedding_forward<T, I>(weight.data(), ids.data(), out.data(), d.n, d.V, d.E);
  for (int64_t i = 0; i < d.n; ++i)
    for (int64_t c = 0; c < d.E; ++c) REQUIRE(out[i * d.E + c] == weight[ids[i] * d.E + c]);
}

const Dims kManyIds{3001, 101, 40};  // n * E past one task's grain: 8 tasks of 13 vocabulary rows

// grad_weight after a backward from 0.5 at `threads` threads (0: the plain loop, in the order of the ids).
template <typename T> std::vector<T> backward_at(int threads) {
  const Dims d = kManyIds;
  const auto ids = ids_for<int64_t>(d.n, d.V, 3);
  const auto grad_out = test::random_values<T>(d.n * d.E, 4, -1, 1);
  std::vector<T> grad_weight(static_cast<size_t>(d.V * d.E), T(0.5));
  if (threads == 0) {
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t c = 0; c < d.E; ++c) grad_weight[ids[i] * d.E + c] += grad_out[i * d.E + c];
    return grad_weight;
  }
  test::ThreadsScope scope(threads);
  kernels::cpu::embedding_backward<T, int64_t>(grad_out.data(), ids.data(), grad_weight.data(), d.n, d.V, d.E);
  return grad_weight;
}

}  // namespace

TEMPLATE_TEST_CASE("cpu embedding_forward gathers the rows of its ids, int32 and int64", "[kernels][embedding]", float,
                   double) {
  for (Dims d : kShapes) {
    check_forward<TestType, int32_t>(d);
    check_forward<TestType, int64_t>(d);
  }
}

TEST_CASE("embedding_backward passes the float64 gradient check of the weight, with repeated ids", "[kernels][embedding]") {
  for (Dims d : {Dims{1, 1, 1}, Dims{9, 4, 3}, Dims{40, 7, 5}}) {
    INFO("n " << d.n << " V " << d.V << " E " << d.E);
    const Tensor ids = Tensor::from_vector(ids_for<int64_t>(d.n, d.V, 5), {d.n});
    const Tensor r = Tensor::randn({d.n, d.E}, 6, DType::F64);
    const auto w = test::random_values<double>(d.V * d.E, 7, -1, 1);
    auto f = [&](const std::vector<double>& v) {
      return ops::sum(ops::mul(ops::embedding(Tensor::from_vector(v, {d.V, d.E}), ids), r)).item<double>();
    };
    Tensor grad = Tensor::full({d.V, d.E}, 0.25, DType::F64);  // backward adds to what is there
    ops::embedding_backward_(grad, r, ids);
    REQUIRE_GRADCHECK(f, w, ops::add(grad, Tensor::full({d.V, d.E}, -0.25, DType::F64)).to_vector<double>());
  }
}

TEST_CASE("embedding_backward adds 500 copies of one id in order, and a second call adds again", "[kernels][embedding]") {
  const Tensor ids = Tensor::full({500}, 3, DType::I64);
  const Tensor g = Tensor::full({500, 2}, 0.125, DType::F64);
  Tensor grad = Tensor::zeros({5, 2}, DType::F64);
  ops::embedding_backward_(grad, g, ids);
  ops::embedding_backward_(grad, g, ids);
  CHECK(grad.to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0, 0, 125, 125, 0, 0});
}

TEMPLATE_TEST_CASE("cpu embedding_backward equals the plain loop's bits at 1 and 2 threads", "[kernels][embedding]",
                   float, double) {
  const std::vector<TestType> one = backward_at<TestType>(1);
  CHECK(one == backward_at<TestType>(0));
  CHECK(one == backward_at<TestType>(2));
  CHECK(one == backward_at<TestType>(2));
  CHECK(one == backward_at<TestType>(1));
}

TEST_CASE("embedding refuses an id out of range before reading or writing anything", "[kernels][embedding]") {
  const Tensor weight = Tensor::ones({7, 3});
  CHECK_THROWS_WITH(ops::embedding(weight, Tensor::from_vector<int64_t>({0, 6, 2, 1, 7, 9}, {2, 3})),
                    "embedding(): id 7 at position 4 of ids (flattened) is out of range for 7 embeddings (valid ids "
                    "are 0..6); make num_embeddings at least the vocabulary size, or fix the ids");
  CHECK_THROWS_WITH(ops::embedding(weight, Tensor::from_vector<int32_t>({3, -1}, {2})),
                    Catch::StartsWith("embedding(): id -1 at position 1 of ids (flattened) is out of range"));
  // The host kernel writes nothing when an id is bad: its output keeps its NaNs.
  const std::vector<float> w(21, 1.0f);
  const std::vector<int64_t> ids = {1, 2, 70};
  std::vector<float> out = test::nans<float>(9);
  CHECK_THROWS_AS((kernels::cpu::embedding_forward<float, int64_t>(w.data(), ids.data(), out.data(), 3, 7, 3)),
                  ValueError);
  CHECK(std::isnan(out[0]));
  // Nor does the backward: grad_weight is untouched.
  Tensor grad = Tensor::zeros({7, 3});
  CHECK_THROWS_WITH(ops::embedding_backward_(grad, Tensor::ones({3, 3}), Tensor::from_vector<int64_t>({1, 2, 70}, {3})),
                    Catch::StartsWith("embedding_backward(): id 70 at position 2 of ids (flattened)"));
  CHECK(ops::sum(grad).item<float>() == 0.0f);
}

TEST_CASE("embedding checks device, then dtype, then shape, and infers the ids shape plus E on meta", "[core][embedding]") {
  const Tensor weight = Tensor::ones({7, 3}), ids = Tensor::zeros({2, 5}, DType::I64);
  // ids wrong in device and dtype: the device is named; weight wrong in dtype and rank: the dtype.
  CHECK_THROWS_AS(ops::embedding(weight, Tensor::empty({2}, DType::F32, Device::meta())), DeviceMismatchError);
  CHECK_THROWS_AS(ops::embedding(Tensor::ones({7}, DType::I64), ids), DTypeError);
  CHECK_THROWS_WITH(ops::embedding(weight, Tensor::zeros({2}, DType::F32)),
                    Catch::Contains("embedding() expects ids of an integer dtype (int32 or int64), but got float32"));
  CHECK_THROWS_WITH(ops::embedding(Tensor::ones({7}), ids),
                    "embedding() expects weight of shape (num_embeddings, embedding_dim), but got [7]");
  CHECK(ops::embedding(weight, ids).shape() == Shape{2, 5, 3});
  CHECK(ops::embedding(weight, Tensor::full({}, 4, DType::I32)).to_vector<float>() == std::vector<float>(3, 1.0f));
  const Tensor meta = ops::embedding(Tensor::empty({7, 3}, DType::F64, Device::meta()),
                                     Tensor::empty({4, 2, 6}, DType::I32, Device::meta()));
  CHECK((meta.device().is_meta() && meta.shape() == Shape{4, 2, 6, 3} && meta.dtype() == DType::F64));

  Tensor grad = Tensor::zeros({7, 3});
  CHECK_THROWS_AS(ops::embedding_backward_(grad, Tensor::empty({2, 5, 3}, DType::F64, Device::meta()), ids),
                  DeviceMismatchError);
  CHECK_THROWS_AS(ops::embedding_backward_(grad, Tensor::ones({2, 5, 4}, DType::F64), ids), DTypeError);
  CHECK_THROWS_WITH(ops::embedding_backward_(grad, Tensor::ones({2, 5, 4}), ids),
                    "embedding_backward() expects grad_output of shape [2, 5, 3] (the ids' shape, then embedding_dim), "
                    "but got [2, 5, 4]");
  Tensor grad_view = Tensor::zeros({3, 7}).t();
  CHECK_THROWS_AS(ops::embedding_backward_(grad_view, Tensor::ones({2, 5, 3}), ids), ValueError);
}
