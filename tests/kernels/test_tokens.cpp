// The ViT's token moves against their definitions: patchify in PyTorch's unfold order (patches row-major over the
// grid, pixels row-major inside a patch, channels first) with the normalisation, prepend_token with one shared or
// one per-sequence token, and the ops' errors (a patch that does not divide the image, a token of the wrong size).
#include <catch2/catch.hpp>

#include <vector>

#include "core/ops.h"

using namespace ember;

TEST_CASE("patchify cuts images in PyTorch's unfold order and normalises each value", "[tokens]") {
  // Two 2-channel 4x6 images holding their own flat index, cut into 2x2 patches: a 2x3 grid of 8 features.
  const int64_t b = 2, c = 2, h = 4, w = 6, p = 2;
  const Tensor x = Tensor::arange(0, double(b * c * h * w), 1, DType::F64).view({b, c, h, w});
  const Tensor out = ops::patchify(x, p, 1.0, 4.0);
  REQUIRE(out.shape() == Shape{b, 6, c * p * p});
  const std::vector<double> got = out.to_vector<double>();
  for (int64_t n = 0; n < b; ++n)
    for (int64_t patch = 0; patch < 6; ++patch)
      for (int64_t f = 0; f < c * p * p; ++f) {
        const int64_t ch = f / (p * p), py = f / p % p, px = f % p;
        const int64_t y = patch / 3 * p + py, xx = patch % 3 * p + px;
        const double pixel = double(((n * c + ch) * h + y) * w + xx);
        INFO("image " << n << " patch " << patch << " feature " << f);
        REQUIRE(got[size_t((n * 6 + patch) * c * p * p + f)] == (pixel - 1.0) / 4.0);
      }
}

TEST_CASE("patchify of the peer's 28x28 Fashion-MNIST image in 7x7 patches", "[tokens]") {
  const Tensor x = Tensor::rand({3, 1, 28, 28}, 5);
  const Tensor out = ops::patchify(x, 7, 0.2860, 0.3530);
  REQUIRE(out.shape() == Shape{3, 16, 49});
  // Patch 5 is grid row 1, column 1: its pixel (2, 3) is image pixel (9, 10).
  const float want = (x.to_vector<float>()[size_t(2 * 784 + 9 * 28 + 10)] - 0.2860f) * (1.0f / 0.3530f);
  CHECK(out.to_vector<float>()[size_t((2 * 16 + 5) * 49 + 2 * 7 + 3)] == Approx(want).epsilon(1e-6));
}

TEST_CASE("prepend_token puts a shared or a per-sequence token first", "[tokens]") {
  const Tensor x = Tensor::arange(0, 12, 1, DType::F32).view({2, 2, 3});
  const Tensor shared = Tensor::from_vector<float>({-1, -2, -3}, {3});
  CHECK(ops::prepend_token(x, shared).to_vector<float>() ==
        std::vector<float>{-1, -2, -3, 0, 1, 2, 3, 4, 5, -1, -2, -3, 6, 7, 8, 9, 10, 11});
  const Tensor rows = Tensor::from_vector<float>({-1, -2, -3, -4, -5, -6}, {2, 3});
  const Tensor out = ops::prepend_token(x, rows);
  REQUIRE(out.shape() == Shape{2, 3, 3});
  CHECK(out.to_vector<float>() == std::vector<float>{-1, -2, -3, 0, 1, 2, 3, 4, 5, -4, -5, -6, 6, 7, 8, 9, 10, 11});
  // An empty sequence gets just its token.
  CHECK(ops::prepend_token(Tensor::zeros({2, 0, 3}), rows).to_vector<float>() == rows.to_vector<float>());
}

TEST_CASE("patchify and prepend_token refuse what they cannot do, with one-line errors", "[tokens]") {
  CHECK_THROWS_WITH(ops::patchify(Tensor::zeros({1, 1, 28, 28}), 5),
                    "patchify(): patch size 5 does not divide the 28x28 image; choose a patch size that divides both sides");
  CHECK_THROWS_AS(ops::patchify(Tensor::zeros({1, 28, 28}), 7), ShapeError);
  CHECK_THROWS_AS(ops::patchify(Tensor::zeros({1, 1, 28, 28}), 7, 0, 0), ValueError);
  CHECK_THROWS_AS(ops::patchify(Tensor::zeros({1, 1, 28, 28}, DType::U8), 7), DTypeError);
  CHECK_THROWS_WITH(ops::prepend_token(Tensor::zeros({2, 4, 3}), Tensor::zeros({4})),
                    Catch::Contains("expects a token of shape [3] or [2, 3] for input [2, 4, 3], but got [4]"));
  CHECK_THROWS_AS(ops::prepend_token(Tensor::zeros({2, 4, 3}), Tensor::zeros({3}, DType::F64)), DTypeError);
  CHECK_THROWS_AS(ops::prepend_token(Tensor::zeros({2, 4, 3}), Tensor::zeros({3}, DType::F32, Device::meta())),
                  DeviceMismatchError);
  // Meta tensors infer the shapes.
  CHECK(ops::patchify(Tensor::zeros({2, 1, 28, 28}, DType::F32, Device::meta()), 4).shape() == Shape{2, 49, 16});
}
