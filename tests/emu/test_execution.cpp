// The emulated execution model: blocks, barriers, warp collectives, atomics and 3-D indices compute what a
// GPU computes, and each rule CUDA leaves undefined is reported with the kernel, block, thread and line.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <numeric>
#include <string>
#include <vector>

#include "tests/emu/kernels.h"
#include "tests/emu/support.h"

using emu_test::Bug;
using emu_test::DeviceVector;

TEST_CASE("a block's threads share memory across __syncthreads", "[emu]") {
  for (int n : {1, 31, 32, 33, 256, 1024}) {
    std::vector<int> in(static_cast<size_t>(n));
    std::iota(in.begin(), in.end(), 7);
    DeviceVector<int> din(in), dout(std::vector<int>(static_cast<size_t>(n), -1));
    REQUIRE(emu_test::reverse_in_block(din.get(), dout.get(), n, nullptr) == cudaSuccess);
    const std::vector<int> out = dout.host();
    for (int i = 0; i < n; ++i) REQUIRE(out[static_cast<size_t>(i)] == in[static_cast<size_t>(n - 1 - i)]);
  }
}

TEST_CASE("xor-shuffle trees and shared memory sum each block", "[emu]") {
  const int n = 1024, blocks = 4;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = static_cast<float>(i % 17);
  DeviceVector<float> din(in), dout(std::vector<float>(blocks, -1.0f));
  REQUIRE(emu_test::block_sums(din.get(), dout.get(), n, blocks, nullptr) == cudaSuccess);
  const std::vector<float> out = dout.host();
  for (int b = 0; b < blocks; ++b) {
    float expected = 0;
    for (int i = b * 256; i < (b + 1) * 256; ++i) expected += in[static_cast<size_t>(i)];
    REQUIRE(out[static_cast<size_t>(b)] == expected);
  }
}

// The reference semantics of the CUDA programming guide, lane by lane.
int shuffle_source(int kind, int lane, int arg, int width) {
  const int base = lane & ~(width - 1);
  switch (kind) {
    case 0: return base + arg % width;
    case 1: return lane - arg >= base ? lane - arg : lane;
    case 2: return lane + arg < base + width ? lane + arg : lane;
    default: return (lane ^ arg) < base + width ? (lane ^ arg) : lane;
  }
}

TEST_CASE("shuffles move values between lanes as the CUDA guide defines, for every width", "[emu]") {
  std::vector<int> in(32);
  for (int l = 0; l < 32; ++l) in[static_cast<size_t>(l)] = 100 + l * 3;
  DeviceVector<int> din(in), dout(std::vector<int>(32, -1));
  for (int kind = 0; kind < 4; ++kind)
    for (int width : {1, 2, 8, 16, 32})
      for (int arg : {0, 1, 3, 5, 16, 31}) {
        CAPTURE(kind, width, arg);
        REQUIRE(emu_test::shuffles(din.get(), dout.get(), kind, arg, width, nullptr) == cudaSuccess);
        const std::vector<int> out = dout.host();
        for (int l = 0; l < 32; ++l)
          REQUIRE(out[static_cast<size_t>(l)] == in[static_cast<size_t>(shuffle_source(kind, l, arg, width))]);
      }
}

TEST_CASE("warp votes and barrier votes count the predicates", "[emu]") {
  std::vector<int> p(32, 0);
  p[3] = p[17] = p[31] = 1;
  DeviceVector<int> dp(p), any(std::vector<int>{-1}), all(std::vector<int>{-1}), count(std::vector<int>{-1});
  DeviceVector<unsigned> ballot(std::vector<unsigned>{0});
  REQUIRE(emu_test::votes(dp.get(), ballot.get(), any.get(), all.get(), nullptr) == cudaSuccess);
  CHECK(ballot.host()[0] == ((1u << 3) | (1u << 17) | (1u << 31)));
  CHECK(any.host()[0] == 1);
  CHECK(all.host()[0] == 0);

  std::vector<int> q(96, 1);
  q[50] = 0;
  DeviceVector<int> dq(q);
  REQUIRE(emu_test::barrier_votes(dq.get(), count.get(), any.get(), all.get(), 96, nullptr) == cudaSuccess);
  CHECK(count.host()[0] == 95);
  CHECK(any.host()[0] == 1);
  CHECK(all.host()[0] == 0);
}

TEST_CASE("threadIdx, blockIdx, blockDim and gridDim work in three dimensions", "[emu]") {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const int total = 3 * 2 * 2 * 4 * 3 * 2;
  DeviceVector<uint32_t> out(std::vector<uint32_t>(total, 0xffffffffu));
  REQUIRE(emu_test::indices_3d(out.get(), grid, block, nullptr) == cudaSuccess);
  const std::vector<uint32_t> v = out.host();
  int i = 0;
  for (uint32_t bz = 0; bz < 2; ++bz)
    for (uint32_t by = 0; by < 2; ++by)
      for (uint32_t bx = 0; bx < 3; ++bx)
        for (uint32_t tz = 0; tz < 2; ++tz)
          for (uint32_t ty = 0; ty < 3; ++ty)
            for (uint32_t tx = 0; tx < 4; ++tx)
              REQUIRE(v[static_cast<size_t>(i++)] ==
                      ((bx << 24) | (by << 20) | (bz << 16) | (tx << 8) | (ty << 4) | tz));
}

TEST_CASE("atomics on shared and device memory count every thread", "[emu]") {
  DeviceVector<unsigned long long> counter(std::vector<unsigned long long>{0});
  DeviceVector<float> sum(std::vector<float>{0.0f});
  REQUIRE(emu_test::count_atomically(counter.get(), sum.get(), 7, 96, nullptr) == cudaSuccess);
  CHECK(counter.host()[0] == 7 * 96);
  CHECK(sum.host()[0] == 0.5f * 7 * 96);
}

TEST_CASE("launches the runtime would refuse fail at launch, through cudaGetLastError", "[emu]") {
  DeviceVector<float> x(std::vector<float>(2048, 0.0f));
  SECTION("more than 1024 threads a block") {
    CHECK(emu_test::bounded_256(x.get(), 2048, nullptr) == cudaErrorInvalidConfiguration);
  }
  SECTION("more threads than the kernel's __launch_bounds__") {
    CHECK(emu_test::bounded_256(x.get(), 512, nullptr) == cudaErrorLaunchOutOfResources);
    CHECK_THAT(cudaGetErrorString(cudaErrorLaunchOutOfResources),
               Catch::Contains("bounded_kernel") && Catch::Contains("__launch_bounds__ allow 256"));
  }
  SECTION("an empty grid") { CHECK(emu_test::add_one(x.get(), 0, nullptr) == cudaErrorInvalidConfiguration); }
  SECTION("within the bounds") { CHECK(emu_test::bounded_256(x.get(), 256, nullptr) == cudaSuccess); }
  CHECK(cudaGetLastError() == cudaSuccess);  // launch errors are not sticky
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

// Runs a broken kernel and returns the device's error message (the device is reset afterwards).
std::string violation_of(Bug bug) {
  DeviceVector<int> out(std::vector<int>(64, 0));
  REQUIRE(emu_test::broken(bug, out.get(), nullptr) == cudaSuccess);  // the launch itself is valid
  const cudaError_t e = cudaDeviceSynchronize();
  REQUIRE(e == cudaErrorLaunchFailure);
  std::string message = cudaGetErrorString(e);
  REQUIRE(cudaGetLastError() == cudaErrorLaunchFailure);  // sticky: every call reports it
  out.forget();                                           // the reset frees device memory
  REQUIRE(cudaDeviceReset() == cudaSuccess);
  return message;
}

TEST_CASE("barrier divergence is reported with kernel, block, thread and line", "[emu]") {
  CHECK_THAT(violation_of(Bug::ExitBeforeBarrier),
             Catch::Contains("barrier divergence") && Catch::Contains("exit_before_barrier") &&
                 Catch::Contains("block (0,0,0)") && Catch::Contains("thread (3,0,0)") &&
                 Catch::Contains("exits while 3 thread(s) wait at __syncthreads") &&
                 Catch::Contains("tests/emu/kernels.cu:"));
  CHECK_THAT(violation_of(Bug::DifferentBarriers),
             Catch::Contains("barrier divergence") && Catch::Contains("thread (1,0,0)") &&
                 Catch::Contains("while thread (0,0,0) waits at __syncthreads"));
}

TEST_CASE("warp masks that leave out the caller, or name lanes that never arrive, are reported", "[emu]") {
  CHECK_THAT(violation_of(Bug::MaskWithoutCaller),
             Catch::Contains("leaves out the calling lane 5") && Catch::Contains("thread (5,0,0)"));
  CHECK_THAT(violation_of(Bug::MaskedLaneExits),
             Catch::Contains("thread (31,0,0)") && Catch::Contains("exits while lanes 0x7fffffff wait for it") &&
                 Catch::Contains("masked_lane_exits"));
  CHECK_THAT(violation_of(Bug::MaskedLaneMissing),
             Catch::Contains("thread (16,0,0)") && Catch::Contains("wait for it in __shfl_xor_sync"));
  CHECK_THAT(violation_of(Bug::ReadsOutsideMask), Catch::Contains("reads lane 20, which is not in the mask"));
  CHECK_THAT(violation_of(Bug::FullMaskPartialWarp),
             Catch::Contains("names lane 16, which does not exist") && Catch::Contains("thread (32,0,0)"));
}

TEST_CASE("__trap fails the device until it is reset", "[emu]") {
  CHECK_THAT(violation_of(Bug::Trap), Catch::Contains("__trap()") && Catch::Contains("thread (7,0,0)"));
  DeviceVector<float> x(std::vector<float>(4, 0.0f));  // the reset device works again
  REQUIRE(emu_test::add_one(x.get(), 4, nullptr) == cudaSuccess);
  CHECK(x.host() == std::vector<float>(4, 1.0f));
}
