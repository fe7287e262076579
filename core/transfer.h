// Byte copies between host and device memory, each recorded in the TransferLedger.
#pragma once

#include <cstddef>

#include "core/device.h"
#include "core/stream.h"

namespace ember {

struct MemoryRef {
  void* data;
  Device device;
  bool pinned;  // page-locked host memory (only meaningful on cpu)
};

// Copies `bytes` from src to dst (cpu<->cuda, cuda<->cuda, cpu<->cpu). A host<->device copy is
// asynchronous only when `non_blocking` and the host side is pinned, as in PyTorch; otherwise it
// returns when the bytes have arrived. Runs on `stream` (default: the device's compute stream).
void transfer(MemoryRef dst, MemoryRef src, size_t bytes, bool non_blocking, const char* tag,
              const cuda::Stream* stream = nullptr);

}  // namespace ember
