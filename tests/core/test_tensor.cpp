// Tensor factories, views, copies and printing on the host (and meta).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/tensor.h"
#include "core/transfer_ledger.h"
#include "support/compare.h"

using namespace ember;

TEST_CASE("Factories fill the values they promise", "[core]") {
  CHECK(Tensor::zeros({2, 3}).to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(Tensor::ones({4}, DType::F64).to_vector<double>() == std::vector<double>(4, 1.0));
  CHECK(Tensor::full({3}, 7, DType::I64).to_vector<int64_t>() == std::vector<int64_t>{7, 7, 7});
  CHECK(Tensor::full({2}, 255, DType::U8).to_vector<uint8_t>() == std::vector<uint8_t>{255, 255});
  CHECK(Tensor::arange(5).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(Tensor::arange(1, 2, 0.25, DType::F64).to_vector<double>() == std::vector<double>{1, 1.25, 1.5, 1.75});
  CHECK(Tensor::arange(3, 0, -1, DType::I32).to_vector<int32_t>() == std::vector<int32_t>{3, 2, 1});
  // A step that does not divide the range still reaches the last value below end: ceil((end - start) / step).
  CHECK(Tensor::arange(0, 10, 3, DType::I32).to_vector<int32_t>() == std::vector<int32_t>{0, 3, 6, 9});
  CHECK(Tensor::arange(5, 0, -2, DType::I64).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
  CHECK(Tensor::arange(0, 1, 0.3, DType::F64).numel() == 4);
  CHECK(Tensor::arange(0).numel() == 0);
  CHECK_THROWS_AS(Tensor::arange(0, 1, 0), ValueError);

  Tensor e = Tensor::empty({2, 0, 3});
  CHECK(e.numel() == 0);
  CHECK(e.shape() == Shape{2, 0, 3});
  CHECK(e.to_vector<float>().empty());

  Tensor d = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(d.dtype() == DType::I32);
  CHECK(d.shape() == Shape{2, 3});
  CHECK(d.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  CHECK_THROWS_AS(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), ShapeError);
  CHECK_THROWS_AS(Tensor::zeros({2, -1}), ShapeError);
  CHECK_THROWS_AS(Tensor::zeros({int64_t(1) << 40, int64_t(1) << 40}), ShapeError);  // overflows int64
}

TEST_CASE("rand and randn are seeded, in range and roughly distributed as asked", "[core]") {
  Tensor a = Tensor::rand({10000}, 42), b = Tensor::rand({10000}, 42), c = Tensor::rand({10000}, 43);
  auto va = a.to_vector<float>();
  CHECK(va == b.to_vector<float>());
  CHECK(va != c.to_vector<float>());
  double mean = 0;
  for (float v : va) {
    REQUIRE(v >= 0.f);
    REQUIRE(v < 1.f);
    mean += v;
  }
  CHECK(mean / va.size() == Approx(0.5).margin(0.02));
  // offset skips into the same stream
  auto shifted = Tensor::rand({10}, 42, DType::F32, Device::cpu(), 0, 1, 5).to_vector<float>();
  for (int i = 0; i < 10; ++i) CHECK(shifted[i] == va[i + 5]);

  auto n = Tensor::randn({20000}, 7, DType::F64, Device::cpu(), 2, 3).to_vector<double>();
  double m = 0, s = 0;
  for (double v : n) m += v;
  m /= n.size();
  for (double v : n) s += (v - m) * (v - m);
  s = std::sqrt(s / n.size());
  CHECK(m == Approx(2).margin(0.1));
  CHECK(s == Approx(3).epsilon(0.05));
  CHECK_THROWS_AS(Tensor::rand({2}, 1, DType::I32), DTypeError);
}

TEST_CASE("view, reshape, flatten, transpose, slice share storage with the right strides", "[core]") {
  Tensor x = Tensor::arange(24).view({2, 3, 4});
  CHECK(x.strides() == Shape{12, 4, 1});
  CHECK(x.view({-1, 4}).shape() == Shape{6, 4});
  CHECK(x.view({4, -1}).shape() == Shape{4, 6});
  CHECK(x.view({24}).storage() == x.storage());
  CHECK_THROWS_AS(x.view({5, -1}), ShapeError);
  CHECK_THROWS_AS(x.view({-1, -1}), ShapeError);
  CHECK_THROWS_AS(x.view({25}), ShapeError);
  CHECK(x.flatten(1).shape() == Shape{2, 12});
  CHECK(x.flatten().shape() == Shape{24});

  Tensor t = x.transpose(0, 2);  // (4, 3, 2)
  CHECK(t.shape() == Shape{4, 3, 2});
  CHECK(t.strides() == Shape{1, 4, 12});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.storage() == x.storage());
  CHECK_THROWS_AS(t.view({24}), ShapeError);
  auto tv = t.contiguous().to_vector<float>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) REQUIRE(tv[(i * 3 + j) * 2 + k] == float(k * 12 + j * 4 + i));
  CHECK(t.reshape({24}).to_vector<float>() == tv);  // reshape of a strided view copies
  CHECK(t.to_vector<float>() == tv);                // to_vector reads in logical order

  Tensor m = Tensor::arange(12).view({3, 4});
  CHECK(m.t().shape() == Shape{4, 3});
  CHECK(m.t().contiguous().to_vector<float>() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK_THROWS_AS(x.t(), ShapeError);
  CHECK_THROWS_AS(x.transpose(0, 3), ShapeError);

  Tensor s = m.slice(1, 1, 3);  // columns 1, 2
  CHECK(s.shape() == Shape{3, 2});
  CHECK(s.to_vector<float>() == std::vector<float>{1, 2, 5, 6, 9, 10});
  CHECK(m.slice(0, 1, 100).shape() == Shape{2, 4});
  CHECK(m.slice(0, -1, 3).to_vector<float>() == std::vector<float>{8, 9, 10, 11});
  CHECK(m.slice(1, 0, 4, 2).to_vector<float>() == std::vector<float>{0, 2, 4, 6, 8, 10});
  CHECK(m.slice(0, 2, 1).numel() == 0);
  CHECK_THROWS_AS(m.slice(0, 0, 1, 0), ValueError);
  CHECK(m.size(-1) == 4);
  CHECK_THROWS_AS(m.size(2), ShapeError);
}

TEST_CASE("slice with a step that does not divide the range keeps the last partial step, as Python does", "[core]") {
  Tensor m = Tensor::arange(12).view({3, 4});
  CHECK(m.slice(1, 0, 4, 3).shape() == Shape{3, 2});  // columns 0, 3
  CHECK(m.slice(1, 0, 4, 3).to_vector<float>() == std::vector<float>{0, 3, 4, 7, 8, 11});
  CHECK(m.slice(1, 1, 4, 2).to_vector<float>() == std::vector<float>{1, 3, 5, 7, 9, 11});
  CHECK(m.slice(0, 0, 3, 2).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 8, 9, 10, 11});
  CHECK(m.slice(1, 2, 100, 5).to_vector<float>() == std::vector<float>{2, 6, 10});  // a step beyond the end
  Tensor v = Tensor::arange(10);
  for (int64_t step = 1; step <= 11; ++step) {
    INFO("step=" << step);
    std::vector<float> expected;  // Python's list(range(1, 9, step))
    for (int64_t i = 1; i < 9; i += step) expected.push_back(float(i));
    CHECK(v.slice(0, 1, 9, step).to_vector<float>() == expected);
  }
}

TEST_CASE("clone copies, and copy_from checks shape and dtype", "[core]") {
  Tensor a = Tensor::arange(4);
  Tensor b = a.clone();
  CHECK(b.storage() != a.storage());
  ops::fill_(b, 9);
  CHECK(a.to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  b.copy_from(a);
  CHECK(b.to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  Tensor wrong_shape = Tensor::zeros({5});
  CHECK_THROWS_AS(wrong_shape.copy_from(a), ShapeError);
  Tensor wrong_dtype = Tensor::zeros({4}, DType::F64);
  CHECK_THROWS_AS(wrong_dtype.copy_from(a), DTypeError);
}

TEST_CASE("to(dtype) casts, and item and to_vector check the dtype", "[core]") {
  Tensor f = Tensor::from_vector<float>({1.5f, -2.7f, 3.f}, {3});
  CHECK(f.to(DType::I32).to_vector<int32_t>() == std::vector<int32_t>{1, -2, 3});
  CHECK(f.to(DType::F64).to_vector<double>()[0] == 1.5);
  CHECK(f.to(DType::F32).storage() == f.storage());
  CHECK_THROWS_AS(f.to_vector<double>(), DTypeError);
  CHECK_THROWS_AS(f.item<float>(), ShapeError);
  CHECK(Tensor::full({1}, 3.25).item<float>() == 3.25f);
  CHECK(Tensor::full({1, 1}, 4, DType::I64).item_as_double() == 4.0);
  Tensor img = Tensor::from_vector<uint8_t>({0, 51, 255}, {3});
  REQUIRE_CLOSE(ops::cast(img, DType::F32, 1.0 / 255).to_vector<float>(), (std::vector<float>{0.f, 0.2f, 1.f}),
                test::kF32);
}

TEST_CASE("Tensors on the same device are not copied by to()", "[core]") {
  TransferLedger::global().reset();
  Tensor a = Tensor::ones({3});
  Tensor b = a.to(Device::cpu());
  CHECK(b.storage() == a.storage());
  CHECK(TransferLedger::global().stats(TransferDirection::HostToDevice).count == 0);
}

TEST_CASE("Meta tensors have shape and dtype but no data", "[core]") {
  Tensor m = Tensor::empty({128, 784}, DType::F32, Device::meta());
  CHECK(m.device().is_meta());
  CHECK(m.numel() == 128 * 784);
  CHECK(m.nbytes() == 128 * 784 * 4);
  CHECK_THROWS_AS(m.raw_data(), ValueError);
  CHECK_THROWS_AS(m.to(Device::cpu()), ValueError);
  CHECK_THROWS_AS(m.to_vector<float>(), ValueError);
  Tensor c = Tensor::ones({2, 2}).to(Device::meta());
  CHECK(c.device().is_meta());
  CHECK(c.shape() == Shape{2, 2});
  CHECK(ops::relu(m).shape() == m.shape());
  CHECK_THAT(m.str(), Catch::Contains("device=meta"));
}

TEST_CASE("Printing shows values, shape, dtype and device like PyTorch", "[core]") {
  CHECK(Tensor::arange(4).view({2, 2}).str() ==
        "tensor([[0.0000, 1.0000],\n        [2.0000, 3.0000]], shape=[2, 2], dtype=float32, device=cpu)");
  CHECK(Tensor::full({3}, 5, DType::I64).str() == "tensor([5, 5, 5], shape=[3], dtype=int64, device=cpu)");
  std::string big = Tensor::arange(5000).str();
  CHECK_THAT(big, Catch::Contains("0.0000, 1.0000, 2.0000, ..., 4997.0000, 4998.0000, 4999.0000"));
  CHECK(Tensor().str() == "tensor(undefined)");
}

TEST_CASE("Pinned host memory and non-blocking copies need a GPU", "[core]") {
  if (cuda::is_available()) return;  // covered by the CUDA tests
  Tensor a = Tensor::ones({4});
  CHECK_FALSE(a.is_pinned());
  CHECK_THROWS_AS(a.pin_memory(), DeviceUnavailableError);
  CHECK_THROWS_AS(Tensor::empty({4}, DType::F32, Device::cpu(), true), DeviceUnavailableError);
  CHECK_THROWS_AS(Tensor::empty({4}, DType::F32, Device::meta(), true), ValueError);
  CHECK_THROWS_AS(a.to(Device::cuda(0), true), DeviceUnavailableError);
}

namespace {

// The "THPeligible" line of /proc/self/smaps for the mapping that holds `address` ("" when there is none).
std::string thp_eligible(uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find('-') < line.find(' ')) {
      inside = begin <= address && address < end;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// The transparent huge page mode, as /sys shows it in brackets ("always", "madvise", "never"), or "".
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t open = all.find('['), close = all.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : all.substr(open + 1, close - open - 1);
}

}  // namespace

TEST_CASE("A large host tensor asks for huge pages and a small one does not", "[core]") {
  // Only the "madvise" mode tells: under "always" every mapping is eligible, under "never" none is.
  if (thp_mode() != "madvise" || thp_eligible(reinterpret_cast<uintptr_t>(&thp_mode)).empty()) {
    WARN("transparent huge pages are not in madvise mode here (mode '" << thp_mode() << "'): nothing to check");
    return;
  }
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto interior = [&](const Tensor& t) {  // the first 2 MiB boundary inside the block
    return (reinterpret_cast<uintptr_t>(t.raw_data()) + kHuge - 1) / kHuge * kHuge;
  };
  Tensor large = Tensor::empty({(int64_t{24} << 20) + 4321}, DType::U8);  // an odd size: a fresh block
  CHECK(thp_eligible(interior(large)).find(" 1") != std::string::npos);
  Tensor medium = Tensor::empty({(int64_t{8} << 20) + 4321}, DType::U8);  // under the 16 MiB threshold
  INFO(thp_eligible(interior(medium)) << " at " << interior(medium) << " of " << medium.raw_data());
  CHECK(thp_eligible(interior(medium)).find(" 0") != std::string::npos);
}

TEST_CASE("A freed host block of a size is handed out again for that size, and factories still fill it", "[core]") {
  // An odd size no other test allocates, so the cache holds no other block of it.
  const int64_t n = 12345;
  const void* first = nullptr;
  {
    Tensor t = Tensor::full({n}, 3.0);
    first = t.raw_data();
  }
  // malloc would give this smaller block out of the one just freed; the cache keeps that one for its own size.
  Tensor smaller = Tensor::empty({n / 2});
  Tensor again = Tensor::zeros({n});
  CHECK(again.to_vector<float>() == std::vector<float>(n, 0.f));  // a reused block is filled like a new one
#if !defined(__SANITIZE_ADDRESS__)  // no cache under AddressSanitizer: a reused block would hide use-after-free
  CHECK(again.raw_data() == first);
  Tensor other = Tensor::zeros({n});  // the block is taken: a second tensor of the size gets a new one
  CHECK(other.raw_data() != first);
#else
  (void)first;
#endif
}
