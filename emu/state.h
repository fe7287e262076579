// The emulated device's state shared by the runtime, memory, launch and cuBLAS parts: devices, streams,
// allocations, the per-thread last error and the device's sticky failure.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "emu/api.h"
#include "emu/stream.h"

namespace emu::detail {

// A kernel that breaks a rule fails the device for good (until cudaDeviceReset), as a GPU fault does:
// every later call returns the error, and cudaGetErrorString gives the emulator's full message.
bool device_failed();
void fail_device(cudaError_t code, const std::string& message);
void clear_device_failure();

// Every API call returns through this: records `code` (and its message, if any) as the thread's last error.
// Once the device has failed, that failure is returned instead of success.
cudaError_t result(cudaError_t code, const std::string& message = {});

int device_count();
int current_device();
size_t device_memory_bytes();

// cudaStream_t -> stream (null = the current device's legacy default stream); null if the handle is unknown.
Stream* stream_of(cudaStream_t handle);
// Queues on `stream` with the legacy default stream's implicit ordering against blocking streams.
uint64_t enqueue(Stream* stream, Task task);
void synchronize_device(int device);

enum class MemoryKind { Device, Pinned, Mapped };
struct Allocation {
  const char* base = nullptr;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::Device;
  int device = 0;
};
// The allocation holding address `p`, if any.
bool find_allocation(const void* p, Allocation* out);
// Frees every device allocation of `device` (cudaDeviceReset).
void release_device_memory(int device);

}  // namespace emu::detail
