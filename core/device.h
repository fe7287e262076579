// Where a tensor lives: cpu (host memory), cuda:N (GPU memory) or meta (shape only, no storage).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ember {

enum class DeviceType : uint8_t { CPU, CUDA, Meta };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // the GPU ordinal for CUDA; always 0 for cpu and meta

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(t == DeviceType::CUDA ? i : 0) {}

  static constexpr Device cpu() { return {DeviceType::CPU}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  static constexpr Device meta() { return {DeviceType::Meta}; }

  // "cpu", "cuda", "cuda:1", "meta". Throws ValueError on anything else. Does not check that the
  // GPU exists: that happens when memory is first allocated on it (see cuda::require()).
  static Device parse(std::string_view text);
  // cuda:0 when a usable GPU exists, else cpu: torch.device("cuda" if available else "cpu"). The emulated
  // device (-DEMBER_CUDA=EMULATED) is usable but never the best: it is always slower than the host.
  static Device best();

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_meta() const { return type == DeviceType::Meta; }
  std::string str() const;

  friend constexpr bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};

namespace cuda {

struct DeviceProperties {
  int index = 0;
  std::string name;
  int64_t total_memory = 0;  // bytes
  int64_t free_memory = 0;   // bytes, at the time of the query
  int multiprocessors = 0;
  int major = 0, minor = 0;  // compute capability
  int driver_version = 0;    // e.g. 13000
  int runtime_version = 0;
};

// True in a -DEMBER_CUDA=EMULATED build: cuda:N is ember's emulated device on the CPU, not a GPU, and nothing
// timed on it is GPU performance (docs/emulation.md).
constexpr bool is_emulated() { return EMBER_CUDA_EMULATED != 0; }

// Number of usable GPUs; 0 without a driver or GPU, never throws.
int device_count();
bool is_available();
// Why CUDA is not usable ("ember was built without CUDA", the driver's error, ...); empty when it is.
std::string unavailable_reason();
DeviceProperties properties(int index);
// Throws DeviceUnavailableError unless `device` is a CUDA device that exists here.
void require(Device device);
// Blocks until all work queued on the device's streams is done.
void synchronize(Device device = Device::cuda());

}  // namespace cuda
}  // namespace ember
