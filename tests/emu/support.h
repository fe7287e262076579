// Device memory for the emulator's own tests.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

namespace emu_test {

template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
    if (cudaMalloc(reinterpret_cast<void**>(&ptr_), n_ * sizeof(T)) != cudaSuccess)
      throw std::runtime_error("cudaMalloc failed");
    if (cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess)
      throw std::runtime_error("cudaMemcpy failed");
  }
  ~DeviceVector() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;

  T* get() const { return ptr_; }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    if (cudaMemcpy(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
      throw std::runtime_error(std::string("cudaMemcpy to the host failed: ") + cudaGetErrorString(cudaGetLastError()));
    return out;
  }
  // After cudaDeviceReset, which frees every device allocation.
  void forget() { ptr_ = nullptr; }

 private:
  T* ptr_ = nullptr;
  size_t n_;
};

}  // namespace emu_test
