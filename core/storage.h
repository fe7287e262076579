// Storage: a move-only owner of bytes from one of three allocators (pageable, pinned, device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"

namespace ember {

enum class MemoryKind : uint8_t { HostPageable, HostPinned, Device, None /* meta: no bytes */ };

const char* memory_kind_name(MemoryKind kind);

class Storage {
 public:
  // Allocates nbytes on `device`; `pinned` asks for page-locked host memory (cpu only).
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device, bool pinned = false);
  // Wraps memory that ember did not allocate (a DLPack producer's, a NumPy array's): `data` holds nbytes on
  // `device` (pageable host memory for cpu), and `deleter` is called once when the Storage dies, instead of an
  // allocator's free. The deleter must not throw.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device, std::function<void()> deleter);

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  Storage(Storage&& other) noexcept;
  Storage& operator=(Storage&& other) noexcept;
  ~Storage();  // returns the bytes to their allocator; never throws

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  MemoryKind kind() const { return kind_; }
  bool is_pinned() const { return kind_ == MemoryKind::HostPinned; }
  bool is_external() const { return static_cast<bool>(deleter_); }  // made by wrap()

 private:
  Storage(void* data, size_t nbytes, size_t reserved, Device device, MemoryKind kind)
      : data_(data), nbytes_(nbytes), reserved_(reserved), device_(device), kind_(kind) {}
  void release() noexcept;

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  size_t reserved_ = 0;  // what the allocator handed out (rounded up), returned on release
  Device device_;
  MemoryKind kind_ = MemoryKind::None;
  std::function<void()> deleter_;  // wrap()'s owner of the bytes; empty for ember's allocators
};

namespace cuda {

// What the caching device allocator holds for one GPU.
struct MemoryStats {
  int64_t allocated_bytes = 0;       // in live tensors (rounded block sizes)
  int64_t reserved_bytes = 0;        // obtained from cudaMalloc: allocated + cached
  int64_t peak_allocated_bytes = 0;
  int64_t device_mallocs = 0;        // cudaMalloc calls
  int64_t cache_hits = 0;            // allocations served from the cache
};

MemoryStats memory_stats(int device = 0);
// Gives every cached (unused) block back to the driver with cudaFree.
void empty_cache(int device = 0);

}  // namespace cuda
}  // namespace ember
