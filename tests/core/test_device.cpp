// Device parsing, printing, best(), and CUDA discovery on a machine that may have no GPU.
#include <catch2/catch.hpp>

#include "core/device.h"
#include "base/error.h"
#include "core/tensor.h"

using namespace ember;

TEST_CASE("Device parses and prints every kind", "[core]") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("meta") == Device::meta());
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::parse("cuda:3").index == 3);
  CHECK(Device::cpu().str() == "cpu");
  CHECK(Device::cuda(1).str() == "cuda:1");
  CHECK(Device::meta().str() == "meta");
  CHECK(Device::parse(Device::cuda(12).str()) == Device::cuda(12));
  CHECK_FALSE(Device::cpu() == Device::cuda(0));
  CHECK_FALSE(Device::cuda(0) == Device::cuda(1));
}

TEST_CASE("Bad device strings throw ValueError that says what is valid", "[core]") {
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cpu:0", " cpu", "cuda:99999999999"}) {
    INFO(bad);
    CHECK_THROWS_AS(Device::parse(bad), ValueError);
  }
  CHECK_THROWS_WITH(Device::parse("gpu"), Catch::Contains("invalid device string 'gpu'") &&
                                              Catch::Contains("Expected cpu, cuda, cuda:N"));
}

TEST_CASE("best() is cuda:0 exactly when CUDA is available", "[core]") {
  if (cuda::is_available()) {
    CHECK(Device::best() == Device::cuda(0));
    CHECK(cuda::unavailable_reason().empty());
  } else {
    CHECK(Device::best() == Device::cpu());
    CHECK(cuda::device_count() == 0);
    CHECK_THAT(cuda::unavailable_reason(), Catch::StartsWith("no usable CUDA device"));
  }
}

TEST_CASE("Asking for CUDA without a GPU, or beyond the device count, is a clear error", "[core]") {
  int n = cuda::device_count();
  // cuda:N with N == count never exists.
  CHECK_THROWS_AS(Tensor::zeros({2}, DType::F32, Device::cuda(n)), DeviceUnavailableError);
  CHECK_THROWS_AS(cuda::properties(n), DeviceUnavailableError);
  if (n == 0) {
    CHECK_THROWS_WITH(Tensor::zeros({2}, DType::F32, Device::cuda(0)),
                      Catch::Contains("cannot use cuda:0") && Catch::Contains("no usable CUDA device") &&
                          Catch::Contains("--device cpu"));
    CHECK_THROWS_AS(Tensor::zeros({2}).pin_memory(), DeviceUnavailableError);
  } else {
    CHECK_THROWS_WITH(Tensor::zeros({2}, DType::F32, Device::cuda(n)),
                      Catch::Contains("CUDA device(s), valid are cuda:0..cuda:"));
  }
}
