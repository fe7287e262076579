// CUDA embedding and head split/merge against their CPU twins (NaN-prefilled outputs): int32 and int64 ids, width 1,
// widths around a warp, more ids than a block's tile and more rows than its range; 500 copies of one id, bit for
// bit with the CPU in float64 and the same bits run to run; the out-of-range flag (zeros written, the first bad
// position raised, the op's error equal to the host's); split and merge over strided views; nn::Embedding on cuda:0.
// Small shapes: the emulated device runs every thread as a fiber.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/embedding.h"
#include "kernels/heads.h"
#include "nn/nn.h"
#include "support/data.h"
#include "support/device_array.h"
#include "support/emulated_size.h"
#include "support/gradcheck.h"

namespace kc = ember::kernels::cpu;
namespace kg = ember::kernels::cuda;

using ember::test::DeviceArray;
using ember::test::nans;
using ember::test::random_values;

namespace {

struct Dims {
  int64_t n, V, E;
};
// One id; width 1; a warp's width and one past; more ids than a 256-id tile; more rows than one block's range.
const std::vector<Dims> kShapes = {{1, 1, 1}, {7, 3, 1}, {40, 11, 32}, {300, 9, 33}, {517, 1100, 5}};

// ids in [0, V); every third one is min(3, V - 1), so rows repeat.
template <typename I> std::vector<I> ids_for(int64_t n, int64_t V) {
  std::vector<I> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<I>(i % 3 == 0 ? std::min<int64_t>(3, V - 1) : (i * 7919 + 5) % V);
  return ids;
}

template <typename T> struct EmbeddingRun {
  std::vector<T> out, grad_weight;
  std::vector<int64_t> flags;  // the forward's and the backward's bad position
};

// Forward, then backward into a grad_weight that starts at 0.5, on the CPU twin or on CUDA.
template <typename T, typename I> EmbeddingRun<T> run_embedding(Dims d, const std::vector<I>& ids, bool device) {
  const auto weight = random_values<T>(d.V * d.E, 51, -1, 1), grad_out = random_values<T>(d.n * d.E, 52, -1, 1);
  EmbeddingRun<T> r{nans<T>(d.n * d.E), std::vector<T>(static_cast<size_t>(d.V * d.E), T(0.5)), {d.n, d.n}};
  if (!device) {
    kc::embedding_forward<T, I>(weight.data(), ids.data(), r.out.data(), d.n, d.V, d.E);
    kc::embedding_backward<T, I>(grad_out.data(), ids.data(), r.grad_weight.data(), d.n, d.V, d.E);
    return r;
  }
  DeviceArray<T> w_d(weight), g_d(grad_out), out_d(r.out), gw_d(r.grad_weight);
  DeviceArray<I> ids_d(ids);
  DeviceArray<int64_t> flags_d(r.flags);
  kg::embedding_forward<T, I>(w_d.ptr, ids_d.ptr, out_d.ptr, d.n, d.V, d.E, flags_d.ptr, nullptr);
  kg::embedding_backward<T, I>(g_d.ptr, ids_d.ptr, gw_d.ptr, d.n, d.V, d.E, flags_d.ptr + 1, nullptr);
  return {out_d.host(), gw_d.host(), flags_d.host()};
}

template <typename T, typename I> void check_twins(Dims d) {
  INFO("n " << d.n << " V " << d.V << " E " << d.E << " id bytes " << sizeof(I));
  const std::vector<I> ids = ids_for<I>(d.n, d.V);
  const EmbeddingRun<T> want = run_embedding<T>(d, ids, false), got = run_embedding<T>(d, ids, true);
  CHECK(got.out == want.out);  // a copy
  CHECK(got.flags == std::vector<int64_t>{d.n, d.n});
  // Both add each row's contributions in the order of the ids: equal bits, float included.
  CHECK(got.grad_weight == want.grad_weight);
}

struct Layout {
  ember::kernels::HeadsLayout l;
  int64_t strided_elements;
};
// A (B, T, F) side inside a larger buffer: each token row padded by 3 elements, each batch by one more row.
Layout padded(int64_t parts, int64_t B, int64_t H, int64_t T, int64_t D) {
  const int64_t F = parts * H * D, token_stride = F + 3, batch_stride = (T + 1) * token_stride;
  return {{parts, B, H, T, D, batch_stride, token_stride}, B * batch_stride};
}

}  // namespace

TEMPLATE_TEST_CASE("CUDA embedding forward and backward equal the CPU twin", "[cuda][embedding]", float, double) {
  for (Dims d : kShapes) {
    check_twins<TestType, int32_t>(d);
    check_twins<TestType, int64_t>(d);
  }
}

TEST_CASE("CUDA embedding_backward adds 500 copies of id 3 as the CPU does, the same bits every run",
          "[cuda][embedding]") {
  const Dims d{ember::test::gpu_or_emulated(2000, 700), 50, 33};
  std::vector<int64_t> ids = ids_for<int64_t>(d.n, d.V);
  for (int64_t i = 0; i < 500; ++i) ids[static_cast<size_t>(i * (d.n / 500))] = 3;
  const EmbeddingRun<double> want64 = run_embedding<double>(d, ids, false), got64 = run_embedding<double>(d, ids, true);
  CHECK(got64.grad_weight == want64.grad_weight);
  const EmbeddingRun<float> want32 = run_embedding<float>(d, ids, false), got32 = run_embedding<float>(d, ids, true);
  REQUIRE_CLOSE(got32.grad_weight, want32.grad_weight, ember::test::kF32Reduce);
  for (int run = 0; run < 2; ++run) CHECK(run_embedding<float>(d, ids, true).grad_weight == got32.grad_weight);
}

TEST_CASE("CUDA embedding reads no id out of range: zeros, the first bad position flagged, the host's error",
          "[cuda][embedding]") {
  const Dims d{300, 7, 3};
  std::vector<int32_t> ids = ids_for<int32_t>(d.n, d.V);
  ids[290] = 7;  // past the end, in the second tile
  ids[261] = -1;
  ids[280] = 1 << 30;
  const EmbeddingRun<float> want = run_embedding<float>(d, ids_for<int32_t>(d.n, d.V), false);
  const EmbeddingRun<float> got = run_embedding<float>(d, ids, true);
  CHECK(got.flags == std::vector<int64_t>{261, 261});
  for (int64_t i = 0; i < d.n; ++i) {
    INFO("row " << i);
    const bool bad = i == 290 || i == 261 || i == 280;
    for (int64_t c = 0; c < d.E; ++c) CHECK(got.out[i * d.E + c] == (bad ? 0.0f : want.out[i * d.E + c]));
  }
  // Through the op: the same ValueError as on the cpu, naming the first bad id, its position and V.
  using namespace ember;
  const Tensor weight = Tensor::ones({7, 3}), bad = Tensor::from_vector(ids, {d.n});
  std::string host, device;
  try { ops::embedding(weight, bad); } catch (const ValueError& e) { host = e.what(); }
  try { ops::embedding(weight.to(Device::cuda(0)), bad.to(Device::cuda(0))); } catch (const ValueError& e) { device = e.what(); }
  CHECK(host == "embedding(): id -1 at position 261 of ids (flattened) is out of range for 7 embeddings (valid ids are "
                "0..6); make num_embeddings at least the vocabulary size, or fix the ids");
  CHECK(device == host);
  Tensor grad = Tensor::zeros({7, 3}, DType::F32, Device::cuda(0));
  CHECK_THROWS_WITH(ops::embedding_backward_(grad, Tensor::ones({d.n, 3}).to(Device::cuda(0)), bad.to(Device::cuda(0))),
                    Catch::StartsWith("embedding_backward(): id -1 at position 261"));
  // The device is still usable: a good call after the bad ones works.
  CHECK(ops::embedding(weight.to(Device::cuda(0)), Tensor::full({2}, 6, DType::I64, Device::cuda(0)))
            .to_vector<float>() == std::vector<float>(6, 1.0f));
}

TEMPLATE_TEST_CASE("CUDA split_heads and merge_heads equal the CPU twin on padded strided layouts", "[cuda][heads]",
                   float, double) {
  using T = TestType;
  for (auto [parts, B, H, T_, D] : std::vector<std::array<int64_t, 5>>{{1, 1, 1, 1, 1}, {1, 2, 3, 5, 7}, {3, 2, 4, 9, 8},
                                                                       {3, 1, 2, 33, 33}}) {
    INFO("parts " << parts << " B " << B << " H " << H << " T " << T_ << " D " << D);
    const Layout layout = padded(parts, B, H, T_, D);
    const int64_t total = parts * B * H * T_ * D;
    const auto x = random_values<T>(layout.strided_elements, 61, -1, 1), y = random_values<T>(total, 62, -1, 1);
    auto split_cpu = nans<T>(total), merge_cpu = nans<T>(layout.strided_elements);
    kc::split_heads<T>(x.data(), split_cpu.data(), layout.l);
    kc::merge_heads<T>(y.data(), merge_cpu.data(), layout.l);
    DeviceArray<T> x_d(x), y_d(y), split_d(nans<T>(total)), merge_d(nans<T>(layout.strided_elements));
    kg::split_heads<T>(x_d.ptr, split_d.ptr, layout.l, nullptr);
    kg::merge_heads<T>(y_d.ptr, merge_d.ptr, layout.l, nullptr);
    CHECK(split_d.host() == split_cpu);
    // The padding stays NaN on both: neither twin writes outside the (B, T, F) side.
    const std::vector<T> merged = merge_d.host();
    for (size_t i = 0; i < merged.size(); ++i) {
      INFO("element " << i);
      CHECK((merged[i] == merge_cpu[i] || (std::isnan(merged[i]) && std::isnan(merge_cpu[i]))));
    }
  }
}

TEST_CASE("split_heads on cuda:0 reads a sliced view in place, and merge_heads inverts it", "[cuda][heads]") {
  using namespace ember;
  const Tensor qkv = Tensor::randn({2, 5, 3 * 24}, 63);
  const Tensor view = qkv.slice(2, 24, 72);  // k|v of a packed projection
  const Tensor want = ops::split_heads(view, 4, 2);
  const Tensor got = ops::split_heads(qkv.to(Device::cuda(0)).slice(2, 24, 72), 4, 2);
  CHECK(got.to_vector<float>() == want.to_vector<float>());
  CHECK(ops::merge_heads(got).to_vector<float>() == view.contiguous().to_vector<float>());
}

TEST_CASE("nn::Embedding on cuda:0 equals the cpu module and passes the float64 gradient check", "[cuda][embedding]") {
  using namespace ember;
  const Device cuda = Device::cuda(0);
  nn::Embedding host(9, 4, DType::F64), dev(9, 4, DType::F64, cuda);
  dev.weight()->value.copy_from(host.weight()->value);
  const Tensor ids = Tensor::from_vector<int64_t>({3, 8, 3, 0, 3, 5}, {2, 3});
  const Tensor r = Tensor::randn({2, 3, 4}, 64, DType::F64);
  host.zero_grad();
  dev.zero_grad();
  CHECK(dev.forward(ids.to(cuda)).to_vector<double>() == host.forward(ids).to_vector<double>());
  CHECK(!dev.backward(r.to(cuda)).defined());
  host.backward(r);
  CHECK(dev.weight()->grad.to_vector<double>() == host.weight()->grad.to_vector<double>());
  CHECK_THROWS_AS(dev.forward(ids), DeviceMismatchError);
  Tensor& w = dev.weight()->value;
  auto f = [&](const std::vector<double>& v) {
    const Tensor saved = w.clone();
    w.copy_from(Tensor::from_vector(v, w.shape()).to(cuda));
    const double s = ops::sum(ops::mul(dev.forward(ids.to(cuda)), r.to(cuda))).item<double>();
    w.copy_from(saved);
    return s;
  };
  REQUIRE_GRADCHECK(f, w.to_vector<double>(), dev.weight()->grad.to_vector<double>());
}
