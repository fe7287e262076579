// Host split_heads and merge_heads against the definition (parts 1 and 3, sizes 1, sliced and transposed views read
// in place, a strided last dim copied first), the round trip both ways, each the other's adjoint
// (<split(x), y> == <x, merge(y)>, so each is the other's backward), the same bits at 1 and 2 threads, and the errors.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/ops.h"
#include "support/threads.h"

using namespace ember;

namespace {

struct Dims {
  int64_t B, T, heads, D;
};
const std::vector<Dims> kShapes = {{1, 1, 1, 1}, {2, 3, 1, 4}, {3, 5, 4, 1}, {2, 7, 3, 5}, {1, 2, 12, 64}};

// x[b, t, f] of a (B, T, F) tensor of any strides.
double at(const Tensor& x, int64_t b, int64_t t, int64_t f) { return x.select(0, b).select(0, t).select(0, f).item_as_double(); }

// out[p, b, h, t, d] == x[b, t, (p * H + h) * D + d] for every element.
void check_split(const Tensor& x, int64_t heads, int64_t parts) {
  const Tensor out = ops::split_heads(x, heads, parts);
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2) / (parts * heads);
  REQUIRE(out.shape() == Shape{parts, B, heads, T, D});
  REQUIRE(out.is_contiguous());
  const std::vector<double> got = out.to(DType::F64).to_vector<double>();
  size_t k = 0;
  for (int64_t p = 0; p < parts; ++p)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d) REQUIRE(got[k++] == at(x, b, t, (p * heads + h) * D + d));
}

double dot(const Tensor& a, const Tensor& b) { return ops::sum(ops::mul(a, b)).item<double>(); }

std::vector<float> bits_at(int threads, bool split) {
  test::ThreadsScope scope(threads);
  const Tensor x = Tensor::randn({4, 129, 3 * 8 * 16}, 9);
  const Tensor out = split ? ops::split_heads(x, 8, 3) : ops::merge_heads(x.view({3, 4, 8, 129, 16}));
  return out.to_vector<float>();
}

}  // namespace

TEMPLATE_TEST_CASE("split_heads follows its definition for parts 1 and 3", "[kernels][heads]", float, double) {
  const DType dtype = dtype_of<TestType>();
  for (Dims d : kShapes)
    for (int64_t parts : {1, 3}) {
      INFO("B " << d.B << " T " << d.T << " heads " << d.heads << " D " << d.D << " parts " << parts);
      check_split(Tensor::randn({d.B, d.T, parts * d.heads * d.D}, 11, dtype), d.heads, parts);
    }
}

TEST_CASE("split_heads reads sliced and transposed views in place and copies a strided last dim", "[kernels][heads]") {
  const Tensor wide = Tensor::randn({2, 5, 40}, 12, DType::F64);
  check_split(wide.slice(2, 8, 32), 3, 2);                 // a packed projection's middle: row stride 40
  check_split(wide.slice(1, 1, 4), 4, 1);                  // a slice of the tokens: batch stride 200, not 3 * 40
  check_split(wide.transpose(0, 1), 5, 2);                 // (T, B) of a (B, T) tensor: both strides swapped
  check_split(wide.slice(2, 0, 40, 2), 2, 1);              // every other feature: made contiguous first
  check_split(Tensor::randn({3, 1, 6}, 13).slice(0, 1, 3), 2, 3);  // a view that starts past its storage's start
}

TEMPLATE_TEST_CASE("merge_heads inverts split_heads both ways, and each is the other's adjoint", "[kernels][heads]",
                   float, double) {
  const DType dtype = dtype_of<TestType>();
  for (Dims d : kShapes)
    for (int64_t parts : {1, 3}) {
      INFO("B " << d.B << " T " << d.T << " heads " << d.heads << " D " << d.D << " parts " << parts);
      const Tensor x = Tensor::randn({d.B, d.T, parts * d.heads * d.D}, 14, dtype);
      const Tensor y = Tensor::randn({parts, d.B, d.heads, d.T, d.D}, 15, dtype);
      CHECK(ops::merge_heads(ops::split_heads(x, d.heads, parts)).to_vector<TestType>() == x.to_vector<TestType>());
      CHECK(ops::split_heads(ops::merge_heads(y), d.heads, parts).to_vector<TestType>() == y.to_vector<TestType>());
      // A permutation: both inner products add the same products, in float64 to the last bit of their sums' order.
      const Tensor x64 = x.to(DType::F64), y64 = y.to(DType::F64);
      CHECK(dot(ops::split_heads(x64, d.heads, parts), y64) == Approx(dot(x64, ops::merge_heads(y64))).epsilon(1e-12));
    }
}

TEST_CASE("split_heads and merge_heads give the same bits at 1 and 2 threads", "[kernels][heads]") {
  for (bool split : {true, false}) {
    INFO("split " << split);
    const std::vector<float> one = bits_at(1, split);
    CHECK(one == bits_at(2, split));
    CHECK(one == bits_at(1, split));
  }
}

TEST_CASE("split_heads and merge_heads refuse bad shapes and dtypes, and infer shapes on meta", "[core][heads]") {
  CHECK_THROWS_WITH(ops::split_heads(Tensor::ones({2, 3, 64}), 5),
                    "split_heads(): embed_dim 64 (the last dim of input [2, 3, 64]) is not divisible by num_heads 5; "
                    "choose num_heads among the divisors of 64, or change embed_dim");
  CHECK_THROWS_WITH(ops::split_heads(Tensor::ones({2, 3, 96}), 5, 3),
                    "split_heads(): the last dim 96 of input [2, 3, 96] packs 3 projections of embed_dim each, so it "
                    "must be divisible by parts * num_heads = 3 * 5 = 15; make embed_dim divisible by num_heads");
  CHECK_THROWS_WITH(ops::split_heads(Tensor::ones({6, 64}), 4),
                    "split_heads() expects input of shape (B, T, parts * num_heads * head_dim), but got [6, 64]");
  CHECK_THROWS_AS(ops::split_heads(Tensor::ones({2, 3, 8}), 0), ValueError);
  CHECK_THROWS_AS(ops::split_heads(Tensor::ones({2, 3, 8}), 2, -1), ValueError);
  CHECK_THROWS_AS(ops::split_heads(Tensor::ones({2, 3, 8}, DType::I64), 2), DTypeError);
  CHECK_THROWS_WITH(ops::merge_heads(Tensor::ones({2, 3, 8})),
                    "merge_heads() expects input of shape (parts, B, num_heads, T, head_dim), but got [2, 3, 8]");
  CHECK_THROWS_AS(ops::merge_heads(Tensor::ones({1, 2, 2, 3, 4}, DType::I32)), DTypeError);
  const Tensor meta = ops::split_heads(Tensor::empty({2, 9, 96}, DType::F32, Device::meta()), 4, 3);
  CHECK((meta.device().is_meta() && meta.shape() == Shape{3, 2, 4, 9, 8}));
  CHECK(ops::merge_heads(meta).shape() == Shape{2, 9, 96});
  CHECK(ops::split_heads(Tensor::ones({0, 3, 8}), 2).shape() == Shape{1, 0, 2, 3, 4});
}
