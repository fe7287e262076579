// The emulated runtime: streams run apart from the host and from each other until a synchronisation or an
// event orders them; memory calls are checked like the real runtime checks them; the device says what it is.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/emu/kernels.h"
#include "tests/emu/support.h"

using emu_test::DeviceVector;

namespace {

struct Stream {
  cudaStream_t s = nullptr;
  explicit Stream(unsigned flags = cudaStreamNonBlocking) { REQUIRE(cudaStreamCreateWithFlags(&s, flags) == cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

struct Pinned {
  float* p = nullptr;
  explicit Pinned(size_t n) { REQUIRE(cudaHostAlloc(&p, n * sizeof(float), cudaHostAllocDefault) == cudaSuccess); }
  ~Pinned() { cudaFreeHost(p); }
};

}  // namespace

TEST_CASE("the emulated device says it is not a GPU and has the H200's shape", "[emu]") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count == 1);
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  CHECK(std::string(prop.name) == "ember CUDA emulator on the CPU (not a GPU)");
  CHECK(prop.major == 9);
  CHECK(prop.warpSize == 32);
  int sms = 0;
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
  CHECK(sms == 132);
  CHECK(cudaSetDevice(1) == cudaErrorInvalidDevice);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice);  // recorded, and cleared by reading it
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a copy into pinned memory is not there until the stream is synchronised", "[emu]") {
  Stream stream;
  Pinned host(8);
  for (int i = 0; i < 8; ++i) host.p[i] = -1.0f;
  DeviceVector<float> x(std::vector<float>(8, 41.0f));
  REQUIRE(emu_test::add_one(x.get(), 8, stream.s) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(host.p, x.get(), 8 * sizeof(float), cudaMemcpyDeviceToHost, stream.s) == cudaSuccess);
  CHECK(host.p[0] == -1.0f);  // the host reads before the stream ran: stale, every time
  CHECK(cudaStreamQuery(stream.s) != cudaErrorInvalidResourceHandle);
  REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
  CHECK(host.p[7] == 42.0f);
}

TEST_CASE("a copy into pageable memory returns with the data, as CUDA's does", "[emu]") {
  Stream stream;
  std::vector<float> host(4, -1.0f);
  DeviceVector<float> x(std::vector<float>(4, 1.0f));
  REQUIRE(emu_test::add_one(x.get(), 4, stream.s) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(host.data(), x.get(), 4 * sizeof(float), cudaMemcpyDeviceToHost, stream.s) == cudaSuccess);
  CHECK(host == std::vector<float>(4, 2.0f));
}

TEST_CASE("a pageable source is staged at the call, so the host may reuse it at once", "[emu]") {
  Stream stream;
  std::vector<float> host(4, 5.0f);
  DeviceVector<float> x(std::vector<float>(4, 0.0f));
  REQUIRE(cudaMemcpyAsync(x.get(), host.data(), 4 * sizeof(float), cudaMemcpyHostToDevice, stream.s) == cudaSuccess);
  host.assign(4, 9.0f);
  REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
  CHECK(x.host() == std::vector<float>(4, 5.0f));
}

TEST_CASE("streams are ordered only by events: without the wait the consumer reads stale data", "[emu]") {
  Stream producer, consumer;
  cudaEvent_t done = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess);
  Pinned source(4);
  for (int i = 0; i < 4; ++i) source.p[i] = 10.0f;
  for (bool wait : {false, true}) {
    CAPTURE(wait);
    DeviceVector<float> x(std::vector<float>(4, 0.0f));
    REQUIRE(cudaMemcpyAsync(x.get(), source.p, 4 * sizeof(float), cudaMemcpyHostToDevice, producer.s) == cudaSuccess);
    REQUIRE(cudaEventRecord(done, producer.s) == cudaSuccess);
    if (wait) REQUIRE(cudaStreamWaitEvent(consumer.s, done, 0) == cudaSuccess);
    REQUIRE(emu_test::add_one(x.get(), 4, consumer.s) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(consumer.s) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(producer.s) == cudaSuccess);
    // With the wait: 10 + 1. Without it the consumer ran first (the producer had not been asked to run),
    // and the copy then overwrote its result.
    CHECK(x.host() == std::vector<float>(4, wait ? 11.0f : 10.0f));
  }
  REQUIRE(cudaEventDestroy(done) == cudaSuccess);
}

TEST_CASE("the legacy default stream waits for blocking streams, not for non-blocking ones", "[emu]") {
  Stream blocking(cudaStreamDefault), non_blocking(cudaStreamNonBlocking);
  DeviceVector<float> a(std::vector<float>(4, 0.0f)), b(std::vector<float>(4, 0.0f));
  REQUIRE(emu_test::add_one(a.get(), 4, blocking.s) == cudaSuccess);
  REQUIRE(emu_test::add_one(b.get(), 4, non_blocking.s) == cudaSuccess);
  std::vector<float> ha(4), hb(4);
  // cudaMemcpy runs on the legacy stream: it sees the blocking stream's kernel, not the other one's.
  REQUIRE(cudaMemcpy(ha.data(), a.get(), 4 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(hb.data(), b.get(), 4 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(ha == std::vector<float>(4, 1.0f));
  CHECK(hb == std::vector<float>(4, 0.0f));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("timed events measure the time between them, and untimed ones refuse", "[emu]") {
  Stream stream;
  cudaEvent_t start = nullptr, end = nullptr, untimed = nullptr;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&end) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming) == cudaSuccess);
  DeviceVector<float> x(std::vector<float>(1 << 16, 0.0f));
  REQUIRE(cudaEventRecord(start, stream.s) == cudaSuccess);
  REQUIRE(emu_test::add_one(x.get(), 1 << 16, stream.s) == cudaSuccess);
  REQUIRE(cudaEventRecord(end, stream.s) == cudaSuccess);
  REQUIRE(cudaEventRecord(untimed, stream.s) == cudaSuccess);
  float ms = -1;
  CHECK(cudaEventQuery(end) != cudaErrorInvalidResourceHandle);
  REQUIRE(cudaEventSynchronize(end) == cudaSuccess);
  REQUIRE(cudaEventElapsedTime(&ms, start, end) == cudaSuccess);
  CHECK(ms >= 0.0f);
  CHECK(cudaEventElapsedTime(&ms, start, untimed) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  for (cudaEvent_t e : {start, end, untimed}) REQUIRE(cudaEventDestroy(e) == cudaSuccess);
}

TEST_CASE("copies are checked against the allocations they touch", "[emu]") {
  DeviceVector<float> x(std::vector<float>(16, 0.0f));
  std::vector<float> host(32, 0.0f);
  SECTION("running past the end of a device allocation") {
    CHECK(cudaMemcpy(x.get(), host.data(), 17 * sizeof(float), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK_THAT(cudaGetErrorString(cudaErrorInvalidValue), Catch::Contains("runs 4 bytes past the end of its 64-byte"));
  }
  SECTION("a host pointer where the kind says device") {
    CHECK(cudaMemcpy(host.data(), host.data() + 16, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK_THAT(cudaGetErrorString(cudaErrorInvalidValue), Catch::Contains("is not device memory"));
  }
  SECTION("a device pointer where the kind says host") {
    CHECK(cudaMemcpy(x.get(), x.get() + 8, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK_THAT(cudaGetErrorString(cudaErrorInvalidValue), Catch::Contains("is device memory, but the copy's kind"));
  }
  SECTION("a memset past the end") { CHECK(cudaMemset(x.get() + 8, 0, 9 * sizeof(float)) == cudaErrorInvalidValue); }
  SECTION("freeing what cudaMalloc did not return") {
    CHECK(cudaFree(x.get() + 1) == cudaErrorInvalidValue);
    CHECK(cudaFree(host.data()) == cudaErrorInvalidValue);
  }
  CHECK(cudaGetLastError() != cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);  // not sticky
}

TEST_CASE("out of device memory behaves as on a GPU", "[emu]") {
  size_t free_before = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
  void* p = reinterpret_cast<void*>(1);
  CHECK(cudaMalloc(&p, total + 1) == cudaErrorMemoryAllocation);
  CHECK(p == nullptr);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  REQUIRE(cudaMalloc(&p, 1 << 20) == cudaSuccess);
  size_t free_after = 0;
  REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
  CHECK(free_before - free_after == (1 << 20));
  REQUIRE(cudaFree(p) == cudaSuccess);
}

TEST_CASE("mapped host memory has a device address kernels can write", "[emu]") {
  float* host = nullptr;
  REQUIRE(cudaHostAlloc(&host, 4 * sizeof(float), cudaHostAllocMapped) == cudaSuccess);
  void* device = nullptr;
  REQUIRE(cudaHostGetDevicePointer(&device, host, 0) == cudaSuccess);
  for (int i = 0; i < 4; ++i) host[i] = 1.0f;
  REQUIRE(emu_test::add_one(static_cast<float*>(device), 4, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(host[3] == 2.0f);
  Pinned unmapped(4);
  CHECK(cudaHostGetDevicePointer(&device, unmapped.p, 0) == cudaErrorInvalidValue);
  cudaGetLastError();
  REQUIRE(cudaFreeHost(host) == cudaSuccess);
}
