// Core on a real GPU: round trips, pinned async copies, the ledger's exact counts, device
// mismatch with real tensors, out-of-memory, the caching allocator.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "core/ops.h"
#include "core/transfer_ledger.h"

using namespace ember;

namespace {
const Device kGpu = Device::cuda(0);
TransferStats h2d() { return TransferLedger::global().stats(TransferDirection::HostToDevice); }
TransferStats d2h() { return TransferLedger::global().stats(TransferDirection::DeviceToHost); }
}  // namespace

TEST_CASE("cpu -> cuda -> cpu round trips keep exact values for every dtype", "[cuda]") {
  for (int64_t n : {1, 3, 1000, 1 << 20}) {
    std::vector<float> f(n);
    std::vector<int64_t> l(n);
    std::vector<uint8_t> u(n);
    for (int64_t i = 0; i < n; ++i) f[i] = float(i) * 0.37f - 11.f, l[i] = i * 1000003 - 7, u[i] = uint8_t(i * 31);
    CHECK(Tensor::from_vector(f, {n}).to(kGpu).to(Device::cpu()).to_vector<float>() == f);
    CHECK(Tensor::from_vector(l, {n}).to(kGpu).to_vector<int64_t>() == l);
    CHECK(Tensor::from_vector(u, {n}).to(kGpu).to(Device::cpu()).to_vector<uint8_t>() == u);
  }
  std::vector<double> d = {1.0 / 3, -2e300, 5e-320};
  CHECK(Tensor::from_vector(d, {3}).to(kGpu).to_vector<double>() == d);
  std::vector<int32_t> i = {INT32_MIN, 0, INT32_MAX};
  CHECK(Tensor::from_vector(i, {3}).to(kGpu).to_vector<int32_t>() == i);
}

TEST_CASE("The ledger counts exactly one copy per transfer with its bytes and kind", "[cuda]") {
  TransferLedger::global().reset();
  Tensor host = Tensor::arange(1000);  // 4000 bytes, pageable
  Tensor dev = host.to(kGpu);
  CHECK(h2d().count == 1);
  CHECK(h2d().bytes == 4000);
  CHECK(h2d().pageable == 1);
  CHECK(h2d().sync == 1);
  CHECK(dev.to(kGpu).storage() == dev.storage());  // already there: no copy
  CHECK(h2d().count == 1);
  Tensor back = dev.to(Device::cpu());
  CHECK(d2h().count == 1);
  CHECK(d2h().bytes == 4000);
  Tensor pinned = host.pin_memory();
  CHECK(pinned.is_pinned());
  Tensor dev2 = pinned.to(kGpu, /*non_blocking=*/true);
  CHECK(h2d().count == 2);
  CHECK(h2d().pinned == 1);
  CHECK(h2d().async == 1);
  CHECK(dev2.to_vector<float>() == host.to_vector<float>());
  CHECK(d2h().count == 2);
}

TEST_CASE("Pinned round trips with non_blocking copies are exact after a synchronize", "[cuda]") {
  std::vector<float> v(1 << 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) / 7.f;
  Tensor pinned = Tensor::from_vector(v, {int64_t(v.size())}).pin_memory();
  Tensor dev = pinned.to(kGpu, true);
  Tensor back = dev.to(Device::cpu(), true);
  CHECK(back.is_pinned());
  cuda::synchronize(kGpu);
  CHECK(back.to_vector<float>() == v);
}

TEST_CASE("A real device mismatch throws before any kernel runs", "[cuda]") {
  Tensor a = Tensor::ones({4}), b = Tensor::ones({4}, DType::F32, kGpu);
  CHECK_THROWS_WITH(ops::add(a, b), "Expected all tensors to be on the same device, but add() got self on cpu and "
                                    "other on cuda:0. Move self with .to(cuda:0), or other with .to(cpu).");
  CHECK_THROWS_AS(ops::mul(b, a), DeviceMismatchError);
  CHECK_THROWS_AS(ops::add_bias(b.view({1, 4}), a), DeviceMismatchError);
}

TEST_CASE("Out of memory says requested, free, total and cached, and the next allocation works", "[cuda]") {
  Tensor keep = Tensor::zeros({1024}, DType::F32, kGpu);
  keep = Tensor();  // one cached block
  const int64_t huge = int64_t(1) << 48;  // 256 TiB
  try {
    Tensor t = Tensor::empty({huge}, DType::U8, kGpu);
    FAIL("allocating 256 TiB succeeded");
  } catch (const OutOfMemoryError& e) {
    std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("CUDA out of memory on cuda:0: tried to allocate 281474976710656 bytes"));
    CHECK_THAT(m, Catch::Contains("bytes free of") && Catch::Contains("total") && Catch::Contains("cached"));
  }
  Tensor small = Tensor::ones({256}, DType::F32, kGpu);
  CHECK(small.to_vector<float>() == std::vector<float>(256, 1.f));
}

TEST_CASE("The caching allocator reuses freed blocks and can release its cache", "[cuda]") {
  cuda::empty_cache(0);
  auto before = cuda::memory_stats(0);
  { Tensor a = Tensor::empty({3 << 20}, DType::F32, kGpu); }  // 12 MiB, freed into the cache
  auto mid = cuda::memory_stats(0);
  CHECK(mid.reserved_bytes >= before.reserved_bytes + (12 << 20));
  CHECK(mid.allocated_bytes == before.allocated_bytes);
  { Tensor b = Tensor::empty({3 << 20}, DType::F32, kGpu); }
  auto after = cuda::memory_stats(0);
  CHECK(after.cache_hits == mid.cache_hits + 1);
  CHECK(after.device_mallocs == mid.device_mallocs);
  cuda::empty_cache(0);
  CHECK(cuda::memory_stats(0).reserved_bytes <= before.reserved_bytes);
}

TEST_CASE("Views, contiguous and casts on the GPU match the host", "[cuda]") {
  Tensor h = Tensor::arange(2 * 3 * 5).view({2, 3, 5});
  Tensor d = h.to(kGpu);
  CHECK(d.transpose(0, 2).contiguous().to_vector<float>() == h.transpose(0, 2).contiguous().to_vector<float>());
  CHECK(d.slice(2, 1, 5, 2).to_vector<float>() == h.slice(2, 1, 5, 2).to_vector<float>());
  CHECK(d.to(DType::I64).to_vector<int64_t>() == h.to(DType::I64).to_vector<int64_t>());
  Tensor img = Tensor::from_vector<uint8_t>({0, 17, 255}, {3});
  CHECK(ops::cast(img.to(kGpu), DType::F32, 1.0 / 255).to_vector<float>() ==
        ops::cast(img, DType::F32, 1.0 / 255).to_vector<float>());
  CHECK(Tensor::full({5}, 3, DType::I32, kGpu).to_vector<int32_t>() == std::vector<int32_t>(5, 3));
}
