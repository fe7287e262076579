// Emulated device, pinned and mapped memory, and the copies and fills between them. Every allocation is its
// own host allocation of the exact size (so AddressSanitizer sees a kernel step past its end), and every copy
// is checked against the allocations it touches, as the real runtime rejects a bad pointer or direction.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "emu/api.h"
#include "emu/state.h"

namespace emu::detail {

namespace {

struct Memory {
  std::mutex mutex;
  std::map<const char*, Allocation> allocations;  // by base address
  std::vector<size_t> used;                       // device bytes in use, per device
};

Memory& memory() {
  static Memory* m = [] {
    auto* mem = new Memory;
    mem->used.assign(static_cast<size_t>(device_count()), 0);
    return mem;
  }();
  return *m;
}

// The granularity a GPU allocator rounds to; counted against the device's memory as it would be there.
size_t charged(size_t bytes) { return (bytes + 511) / 512 * 512; }

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Device-side operand of a copy or fill: `bytes` at `p` inside one device (or mapped) allocation.
cudaError_t check_device_range(const char* what, const void* p, size_t bytes, std::string* why) {
  Allocation a;
  if (!find_allocation(p, &a) || a.kind == MemoryKind::Pinned) {
    *why = std::string(what) + " " + hex(p) + " is not device memory (no cudaMalloc'ed allocation holds it)";
    return cudaErrorInvalidValue;
  }
  const size_t offset = static_cast<size_t>(static_cast<const char*>(p) - a.base);
  if (bytes > a.bytes - offset) {
    *why = std::string(what) + " " + hex(p) + " + " + std::to_string(bytes) + " bytes runs " +
           std::to_string(bytes - (a.bytes - offset)) + " bytes past the end of its " + std::to_string(a.bytes) +
           "-byte allocation";
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t check_host_pointer(const char* what, const void* p, std::string* why) {
  Allocation a;
  if (find_allocation(p, &a) && a.kind == MemoryKind::Device) {
    *why = std::string(what) + " " + hex(p) + " is device memory, but the copy's kind says host";
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

bool is_pinned(const void* p) {
  Allocation a;
  return find_allocation(p, &a) && a.kind != MemoryKind::Device;
}

cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, std::string* why) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) {
    *why = "a null pointer";
    return cudaErrorInvalidValue;
  }
  switch (kind) {
    case cudaMemcpyHostToDevice: {
      cudaError_t e = check_device_range("destination", dst, bytes, why);
      return e != cudaSuccess ? e : check_host_pointer("source", src, why);
    }
    case cudaMemcpyDeviceToHost: {
      cudaError_t e = check_device_range("source", src, bytes, why);
      return e != cudaSuccess ? e : check_host_pointer("destination", dst, why);
    }
    case cudaMemcpyDeviceToDevice: {
      cudaError_t e = check_device_range("destination", dst, bytes, why);
      return e != cudaSuccess ? e : check_device_range("source", src, bytes, why);
    }
    case cudaMemcpyHostToHost: {
      cudaError_t e = check_host_pointer("destination", dst, why);
      return e != cudaSuccess ? e : check_host_pointer("source", src, why);
    }
    default:
      *why = "cudaMemcpyDefault is not emulated: name the direction";
      return cudaErrorInvalidMemcpyDirection;
  }
}

cudaError_t allocate(void** ptr, size_t bytes, MemoryKind kind, size_t alignment) {
  if (ptr == nullptr) return result(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes == 0) return result(cudaSuccess);
  Memory& m = memory();
  const int device = current_device();
  if (kind == MemoryKind::Device) {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (m.used[static_cast<size_t>(device)] + charged(bytes) > device_memory_bytes())
      return result(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(bytes) + " bytes: " +
                                                   std::to_string(m.used[static_cast<size_t>(device)]) + " of " +
                                                   std::to_string(device_memory_bytes()) +
                                                   " bytes in use (EMBER_EMU_MEMORY sets the size)");
    m.used[static_cast<size_t>(device)] += charged(bytes);
  }
  void* p = nullptr;
  if (posix_memalign(&p, alignment, bytes) != 0) {
    if (kind == MemoryKind::Device) {
      std::lock_guard<std::mutex> lock(m.mutex);
      m.used[static_cast<size_t>(device)] -= charged(bytes);
    }
    return result(cudaErrorMemoryAllocation, "the host has no room for " + std::to_string(bytes) + " bytes");
  }
  std::lock_guard<std::mutex> lock(m.mutex);
  m.allocations[static_cast<const char*>(p)] = Allocation{static_cast<const char*>(p), bytes, kind, device};
  *ptr = p;
  return result(cudaSuccess);
}

cudaError_t release(void* ptr, bool device_side) {
  if (ptr == nullptr) return result(cudaSuccess);
  Memory& m = memory();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.allocations.find(static_cast<const char*>(ptr));
    if (it == m.allocations.end() || (it->second.kind == MemoryKind::Device) != device_side)
      return result(cudaErrorInvalidValue, std::string(device_side ? "cudaFree" : "cudaFreeHost") + " of " + hex(ptr) +
                                               ", which is not the start of a live " +
                                               (device_side ? "cudaMalloc" : "cudaHostAlloc") + " allocation");
    a = it->second;
  }
  // Both free calls wait for the device first, as the real ones do: queued work may still use the memory.
  synchronize_device(a.device);
  std::lock_guard<std::mutex> lock(m.mutex);
  m.allocations.erase(a.base);
  if (a.kind == MemoryKind::Device) m.used[static_cast<size_t>(a.device)] -= charged(a.bytes);
  std::free(ptr);
  return result(cudaSuccess);
}

// Queues a copy (or fill) and, when the host side is pageable, behaves as CUDA does with it: the source is
// staged before the call returns (H2D), or the call waits for the copy (D2H).
cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, Stream* stream, bool wait) {
  const char* s = static_cast<const char*>(src);
  if (kind == cudaMemcpyHostToDevice && !wait && !is_pinned(src)) {
    auto staged = std::make_shared<std::vector<char>>(s, s + bytes);
    enqueue(stream, Task{[dst, staged] { std::memcpy(dst, staged->data(), staged->size()); }});
    return result(cudaSuccess);
  }
  const uint64_t position = enqueue(stream, Task{[dst, src, bytes] { std::memcpy(dst, src, bytes); }});
  const bool pageable_destination = kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyHostToDevice && !is_pinned(dst);
  if (wait || pageable_destination) stream->wait_until(position);
  return result(cudaSuccess);
}

cudaError_t fill(void* ptr, int value, size_t bytes, cudaStream_t handle, bool wait) {
  Stream* stream = stream_of(handle);
  if (stream == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return result(cudaSuccess);
  std::string why;
  if (check_device_range("cudaMemset destination", ptr, bytes, &why) != cudaSuccess)
    return result(cudaErrorInvalidValue, why);
  const uint64_t position = enqueue(stream, Task{[ptr, value, bytes] { std::memset(ptr, value, bytes); }});
  if (wait) stream->wait_until(position);
  return result(cudaSuccess);
}

cudaError_t memcpy_on(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t handle, bool wait) {
  Stream* stream = stream_of(handle);
  if (stream == nullptr) return result(cudaErrorInvalidResourceHandle);
  std::string why;
  const cudaError_t e = check_copy(dst, src, bytes, kind, &why);
  if (e != cudaSuccess) return result(e, why);
  if (bytes == 0) return result(cudaSuccess);
  return copy(dst, src, bytes, kind, stream, wait);
}

}  // namespace

bool find_allocation(const void* p, Allocation* out) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  const char* c = static_cast<const char*>(p);
  auto it = m.allocations.upper_bound(c);
  if (it == m.allocations.begin()) return false;
  --it;
  if (c >= it->second.base + it->second.bytes) return false;
  *out = it->second;
  return true;
}

void release_device_memory(int device) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  for (auto it = m.allocations.begin(); it != m.allocations.end();) {
    if (it->second.kind == MemoryKind::Device && it->second.device == device) {
      std::free(const_cast<char*>(it->first));
      it = m.allocations.erase(it);
    } else {
      ++it;
    }
  }
  m.used[static_cast<size_t>(device)] = 0;
}

}  // namespace emu::detail

using namespace emu::detail;

// GPU allocations are at least 256-byte aligned, and kernels rely on it (vector loads).
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (device_count() == 0) return result(cudaErrorNoDevice);
  return allocate(ptr, bytes, MemoryKind::Device, 256);
}
cudaError_t cudaFree(void* ptr) { return release(ptr, /*device_side=*/true); }

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  if ((flags & ~(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined)) != 0)
    return result(cudaErrorInvalidValue);
  return allocate(ptr, bytes, (flags & cudaHostAllocMapped) ? MemoryKind::Mapped : MemoryKind::Pinned, 4096);
}
cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault); }
cudaError_t cudaFreeHost(void* ptr) { return release(ptr, /*device_side=*/false); }

// With unified addressing a mapped host buffer has the same address on the device.
cudaError_t cudaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned flags) {
  Allocation a;
  if (device_ptr == nullptr || flags != 0) return result(cudaErrorInvalidValue);
  if (!find_allocation(host_ptr, &a) || a.kind != MemoryKind::Mapped)
    return result(cudaErrorInvalidValue, "cudaHostGetDevicePointer: " + hex(host_ptr) +
                                             " is not in memory allocated with cudaHostAllocMapped");
  *device_ptr = host_ptr;
  return result(cudaSuccess);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return memcpy_on(dst, src, bytes, kind, nullptr, /*wait=*/true);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return memcpy_on(dst, src, bytes, kind, stream, /*wait=*/false);
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) { return fill(ptr, value, bytes, nullptr, true); }
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  return fill(ptr, value, bytes, stream, false);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return result(cudaErrorInvalidValue);
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  *total_bytes = device_memory_bytes();
  *free_bytes = *total_bytes - m.used[static_cast<size_t>(current_device())];
  return result(cudaSuccess);
}
