// DeviceArray: a cudaMalloc'ed copy of a host vector for the CUDA kernel tests.
#pragma once

#include <algorithm>
#include <vector>

#include "core/cuda_check.h"

namespace ember::test {

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceArray(const std::vector<T>& host) : n(host.size()) {
    CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(1, n) * sizeof(T)));
    if (n > 0) CUDA_CHECK(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr); }
  std::vector<T> host() const {
    CUDA_CHECK(cudaDeviceSynchronize());  // surfaces asynchronous kernel faults here
    std::vector<T> out(n);
    if (n > 0) CUDA_CHECK(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }
};

}  // namespace ember::test
