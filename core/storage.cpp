// The three allocators behind Storage: 64-byte aligned pageable (freed blocks kept for reuse), cudaHostAlloc
// pinned, and a caching device allocator that keeps freed blocks for reuse (cudaMalloc/cudaFree are slow and sync).
#include "core/storage.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "core/cuda_runtime.h"
#include "base/error.h"

namespace ember {

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::HostPageable: return "pageable";
    case MemoryKind::HostPinned: return "pinned";
    case MemoryKind::Device: return "device";
    case MemoryKind::None: return "none";
  }
  return "?";
}

namespace {

constexpr size_t kHostAlign = 64;
constexpr size_t kSmallBlock = 512;           // device blocks under 1 MiB round to 512 B
constexpr size_t kLargeBlock = 2u << 20;      // larger ones to 2 MiB
constexpr size_t kLargeThreshold = 1u << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Pageable blocks of kHugePageAdvice bytes or more ask Linux for transparent huge pages over their 2 MiB-aligned
// interior, before anything touches them (madvise(MADV_HUGEPAGE); with THP in its usual "madvise" mode nothing is
// backed by huge pages without it). Such a block is a dataset or a large batch, and the training set is read by
// rows at random: with 4 KiB pages the batch gather takes a TLB miss on nearly every 784-byte image
// (docs/benchmarks.md, "Measurements behind the code"). A hint: where the kernel refuses or lacks it, nothing
// changes.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugePageAdvice = size_t{16} << 20;

void advise_huge_pages(void* block, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes < kHugePageAdvice) return;
  const auto start = reinterpret_cast<uintptr_t>(block);
  const uintptr_t begin = (start + kHugePage - 1) / kHugePage * kHugePage, end = (start + bytes) / kHugePage * kHugePage;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)block;
  (void)bytes;
#endif
}

// Freed pageable blocks, kept for reuse by exact size. A CPU training step frees and asks again for the same
// sizes every step (activations and their gradients), and glibc gives blocks of a few hundred KiB back to the
// OS on free (munmap, or trimming the heap's top), so each step would pay page faults and malloc_consolidate on
// the calling thread (docs/benchmarks.md, "Measurements behind the code"). At most kHostCacheBytes are
// kept; beyond that a freed block goes back to malloc. Off under AddressSanitizer, whose use-after-free reports
// a reused block would hide.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kHostCacheBytes = 0;
#else
constexpr size_t kHostCacheBytes = size_t{256} << 20;
#endif

class HostBlockCache {
 public:
  static HostBlockCache& instance() {
    static HostBlockCache* cache = new HostBlockCache();  // outlives static tensors
    return *cache;
  }

  void* allocate(size_t reserved) {
    {
      std::lock_guard lock(mutex_);
      auto it = free_blocks_.find(reserved);
      if (it != free_blocks_.end()) {
        void* ptr = it->second;
        free_blocks_.erase(it);
        cached_ -= reserved;
        return ptr;
      }
    }
    void* block = std::aligned_alloc(kHostAlign, reserved);
    if (block != nullptr) advise_huge_pages(block, reserved);
    return block;
  }

  void release(void* ptr, size_t reserved) noexcept {
    try {
      std::lock_guard lock(mutex_);
      if (cached_ + reserved <= kHostCacheBytes) {
        free_blocks_.emplace(reserved, ptr);
        cached_ += reserved;
        return;
      }
    } catch (...) {  // no memory for the map's node: free the block instead
    }
    std::free(ptr);
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_blocks_;
  size_t cached_ = 0;
};

// Blocks are cached by their rounded size and reused only for that exact size: a training
// loop asks for the same sizes every step, and no block is ever split or wasted on a small request.
class CachingDeviceAllocator {
 public:
  static CachingDeviceAllocator& instance() {
    static CachingDeviceAllocator* a = new CachingDeviceAllocator();  // outlives static tensors
    return *a;
  }

  static size_t block_size(size_t nbytes) {
    if (nbytes == 0) nbytes = 1;
    return nbytes < kLargeThreshold ? round_up(nbytes, kSmallBlock) : round_up(nbytes, kLargeBlock);
  }

  void* allocate(size_t block, int device) {
    std::lock_guard lock(mutex_);
    PerDevice& d = per_device(device);
    auto it = d.free_blocks.find(block);
    void* ptr = nullptr;
    if (it != d.free_blocks.end()) {
      ptr = it->second;
      d.free_blocks.erase(it);
      d.cached -= static_cast<int64_t>(block);
      d.stats.cache_hits++;
    } else {
      ptr = cuda::runtime::malloc_device(block, device);
      if (ptr == nullptr) {  // out of memory: give the cache back and try once more
        release_cache(device, d);
        ptr = cuda::runtime::malloc_device(block, device);
      }
      if (ptr == nullptr) throw oom(block, device, d);
      d.stats.device_mallocs++;
      d.stats.reserved_bytes += static_cast<int64_t>(block);
    }
    d.stats.allocated_bytes += static_cast<int64_t>(block);
    d.stats.peak_allocated_bytes = std::max(d.stats.peak_allocated_bytes, d.stats.allocated_bytes);
    return ptr;
  }

  void release(void* ptr, size_t block, int device) noexcept {
    std::lock_guard lock(mutex_);
    PerDevice& d = per_device(device);
    // All ember work runs on one compute stream per device, so a block freed here can be reused
    // by later work on that stream without waiting.
    d.free_blocks.emplace(block, ptr);
    d.cached += static_cast<int64_t>(block);
    d.stats.allocated_bytes -= static_cast<int64_t>(block);
  }

  cuda::MemoryStats stats(int device) {
    std::lock_guard lock(mutex_);
    return per_device(device).stats;
  }

  void empty_cache(int device) {
    std::lock_guard lock(mutex_);
    release_cache(device, per_device(device));
  }

 private:
  struct PerDevice {
    std::multimap<size_t, void*> free_blocks;
    int64_t cached = 0;
    cuda::MemoryStats stats;
  };

  PerDevice& per_device(int device) {
    if (static_cast<size_t>(device) >= devices_.size()) devices_.resize(device + 1);
    return devices_[device];
  }

  void release_cache(int device, PerDevice& d) {
    if (!d.free_blocks.empty()) cuda::runtime::stream_synchronize(cuda::runtime::compute_stream(device));
    for (auto& [size, ptr] : d.free_blocks) {
      cuda::runtime::free_device(ptr, device);
      d.stats.reserved_bytes -= static_cast<int64_t>(size);
    }
    d.free_blocks.clear();
    d.cached = 0;
  }

  OutOfMemoryError oom(size_t block, int device, const PerDevice& d) {
    size_t free_b = 0, total_b = 0;
    cuda::runtime::mem_get_info(device, &free_b, &total_b);
    return OutOfMemoryError(detail::concat(
        "CUDA out of memory on cuda:", device, ": tried to allocate ", block, " bytes; the GPU has ", free_b,
        " bytes free of ", total_b, " total; ember holds ", d.stats.allocated_bytes, " bytes in tensors and ",
        d.cached, " bytes cached. Use a smaller batch or model, or free tensors you no longer need."));
  }

  std::mutex mutex_;
  std::vector<PerDevice> devices_;
};

}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device, bool pinned) {
  EMBER_CHECK(!pinned || device.is_cpu(), ValueError, "pinned memory is host memory: pin_memory() needs a cpu "
              "tensor, but it was asked for on ", device.str());
  switch (device.type) {
    case DeviceType::Meta:
      return std::shared_ptr<Storage>(new Storage(nullptr, nbytes, 0, device, MemoryKind::None));
    case DeviceType::CPU: {
      size_t reserved = round_up(std::max<size_t>(nbytes, 1), kHostAlign);
      void* ptr = nullptr;
      if (pinned) {
        cuda::require(Device::cuda(0));
        ptr = cuda::runtime::malloc_pinned(reserved);
      } else {
        ptr = HostBlockCache::instance().allocate(reserved);
        EMBER_CHECK(ptr != nullptr, OutOfMemoryError, "out of host memory: cannot allocate ", nbytes, " bytes");
      }
      return std::shared_ptr<Storage>(
          new Storage(ptr, nbytes, reserved, device, pinned ? MemoryKind::HostPinned : MemoryKind::HostPageable));
    }
    case DeviceType::CUDA: {
      cuda::require(device);
      size_t block = CachingDeviceAllocator::block_size(nbytes);
      void* ptr = CachingDeviceAllocator::instance().allocate(block, device.index);
      return std::shared_ptr<Storage>(new Storage(ptr, nbytes, block, device, MemoryKind::Device));
    }
  }
  throw InternalError("Storage::allocate: unknown device type");
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device, std::function<void()> deleter) {
  EMBER_CHECK(!device.is_meta(), ValueError, "Storage::wrap: meta tensors have no memory to wrap");
  EMBER_CHECK(data != nullptr || nbytes == 0, ValueError, "Storage::wrap: a null pointer cannot hold ", nbytes,
              " bytes");
  EMBER_CHECK(static_cast<bool>(deleter), ValueError, "Storage::wrap needs a deleter (a no-op one for borrowed memory)");
  if (device.is_cuda()) cuda::require(device);
  auto kind = device.is_cuda() ? MemoryKind::Device : MemoryKind::HostPageable;
  std::shared_ptr<Storage> s(new Storage(data, nbytes, 0, device, kind));
  s->deleter_ = std::move(deleter);
  return s;
}

void Storage::release() noexcept {
  if (deleter_) {  // wrapped memory goes back to its owner, even a null pointer of zero bytes
    auto deleter = std::move(deleter_);
    deleter_ = nullptr;
    data_ = nullptr;
    deleter();
    return;
  }
  if (data_ == nullptr) return;
  switch (kind_) {
    case MemoryKind::HostPageable: HostBlockCache::instance().release(data_, reserved_); break;
    case MemoryKind::HostPinned: cuda::runtime::free_pinned(data_); break;
    case MemoryKind::Device: CachingDeviceAllocator::instance().release(data_, reserved_, device_.index); break;
    case MemoryKind::None: break;
  }
  data_ = nullptr;
}

Storage::Storage(Storage&& other) noexcept
    : data_(other.data_), nbytes_(other.nbytes_), reserved_(other.reserved_), device_(other.device_),
      kind_(other.kind_), deleter_(std::move(other.deleter_)) {
  other.data_ = nullptr;
  other.deleter_ = nullptr;
}

Storage& Storage::operator=(Storage&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    nbytes_ = other.nbytes_;
    reserved_ = other.reserved_;
    device_ = other.device_;
    kind_ = other.kind_;
    deleter_ = std::move(other.deleter_);
    other.data_ = nullptr;
    other.deleter_ = nullptr;
  }
  return *this;
}

Storage::~Storage() { release(); }

namespace cuda {

MemoryStats memory_stats(int device) {
  require(Device::cuda(device));
  return CachingDeviceAllocator::instance().stats(device);
}

void empty_cache(int device) {
  require(Device::cuda(device));
  CachingDeviceAllocator::instance().empty_cache(device);
}

}  // namespace cuda
}  // namespace ember
