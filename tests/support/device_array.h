// Device memory for the CUDA kernel tests: DeviceArray (a cudaMalloc'ed copy of a host vector),
// DeviceBuffer (n elements at an element offset, to reach the kernels' unaligned paths) and TestStream.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "base/cuda_check.h"

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

// n elements `offset` elements past a cudaMalloc'ed (256-byte aligned) base: offset 1 breaks 16-byte
// alignment. get() is null for n = 0, the way an empty tensor reaches the kernels.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t n, int offset = 0) : n_(n), offset_(offset) {
    CUDA_CHECK(cudaMalloc(&base_, static_cast<size_t>(std::max<int64_t>(1, n + offset)) * sizeof(T)));
  }
  ~DeviceBuffer() { cudaFree(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return n_ == 0 ? nullptr : base_ + offset_; }
  int64_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    if (static_cast<int64_t>(host.size()) != n_) throw std::invalid_argument("DeviceBuffer::upload: size mismatch");
    if (n_ > 0) CUDA_CHECK(cudaMemcpy(get(), host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  void set(int64_t i, T value) { CUDA_CHECK(cudaMemcpy(get() + i, &value, sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> download() const {
    std::vector<T> host(static_cast<size_t>(n_));
    if (n_ > 0) CUDA_CHECK(cudaMemcpy(host.data(), get(), bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  size_t bytes() const { return static_cast<size_t>(n_) * sizeof(T); }
  T* base_ = nullptr;
  int64_t n_;
  int offset_;
};

// A blocking stream of its own, so launches are not on the legacy default stream.
class TestStream {
 public:
  TestStream() { CUDA_CHECK(cudaStreamCreate(&stream_)); }
  ~TestStream() { cudaStreamDestroy(stream_); }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  cudaStream_t get() const { return stream_; }
  void sync() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace ember::test
