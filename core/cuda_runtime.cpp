// Device discovery and the CUDA runtime glue behind core/cuda_runtime.h (stubs without CUDA).
#include "core/cuda_runtime.h"

#include <array>
#include <mutex>

#include "core/deferred.h"
#include "core/device.h"
#include "base/error.h"

#if EMBER_HAS_CUDA
#include "base/cuda_check.h"
#endif

namespace ember::cuda {

namespace {

constexpr int kMaxDevices = 64;

struct Discovery {
  int count = 0;
  std::string reason;  // why there is no usable device; empty when count > 0
};

// Asked once per process: without a driver the runtime answers with an error, which is the
// normal "no GPU" path on the development machines, not a crash.
const Discovery& discovery() {
  static const Discovery d = [] {
    Discovery out;
#if EMBER_HAS_CUDA
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      cudaGetLastError();
      out.reason = detail::concat("no usable CUDA device: ", cudaGetErrorString(err), " (",
                                  cudaGetErrorName(err), ")");
    } else if (n == 0) {
      out.reason = "no usable CUDA device: the driver reports 0 GPUs";
    } else {
      out.count = std::min(n, kMaxDevices);
    }
#else
    out.reason = "no usable CUDA device: ember was built without CUDA (-DEMBER_CUDA=OFF or nvcc not found)";
#endif
    return out;
  }();
  return d;
}

}  // namespace

int device_count() { return discovery().count; }
bool is_available() { return device_count() > 0; }
std::string unavailable_reason() { return discovery().reason; }

void require(Device device) {
  EMBER_CHECK(device.is_cuda(), ValueError, "expected a CUDA device, got ", device.str());
  EMBER_CHECK(is_available(), DeviceUnavailableError, "cannot use ", device.str(), ": ", unavailable_reason(),
              ". Use --device cpu (or Device::best()) on this machine.");
  EMBER_CHECK(device.index >= 0 && device.index < device_count(), DeviceUnavailableError, "cannot use ",
              device.str(), ": this machine has ", device_count(), " CUDA device(s), valid are cuda:0..cuda:",
              device_count() - 1, ".");
}

DeviceProperties properties(int index) {
  require(Device::cuda(index));
  DeviceProperties p;
#if EMBER_HAS_CUDA
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  p.index = index;
  p.name = prop.name;
  p.total_memory = static_cast<int64_t>(prop.totalGlobalMem);
  p.multiprocessors = prop.multiProcessorCount;
  p.major = prop.major;
  p.minor = prop.minor;
  size_t free_b = 0, total_b = 0;
  runtime::mem_get_info(index, &free_b, &total_b);
  p.free_memory = static_cast<int64_t>(free_b);
  CUDA_CHECK(cudaDriverGetVersion(&p.driver_version));
  CUDA_CHECK(cudaRuntimeGetVersion(&p.runtime_version));
#endif
  return p;
}

void synchronize(Device device) {
  require(device);
  runtime::stream_synchronize(runtime::compute_stream(device.index));
  runtime::stream_synchronize(runtime::copy_stream(device.index));
  detail::raise_deferred_errors(device);
}

namespace runtime {

#if EMBER_HAS_CUDA

namespace {

struct Streams {
  std::once_flag once[kMaxDevices];
  std::array<cudaStream_t, kMaxDevices> compute{};
  std::array<cudaStream_t, kMaxDevices> copy{};
  std::array<cudaStream_t, kMaxDevices> collective{};
};

Streams& streams() {
  static Streams s;  // never destroyed streams are fine: the driver reclaims them at exit
  return s;
}

void init_streams(int device) {
  Streams& s = streams();
  std::call_once(s.once[device], [&] {
    set_device(device);
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.compute[device], cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.copy[device], cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.collective[device], cudaStreamNonBlocking));
  });
}

}  // namespace

kernels::Stream compute_stream(int device) {
  require(Device::cuda(device));
  init_streams(device);
  return streams().compute[device];
}

kernels::Stream copy_stream(int device) {
  require(Device::cuda(device));
  init_streams(device);
  return streams().copy[device];
}

kernels::Stream collective_stream(int device) {
  require(Device::cuda(device));
  init_streams(device);
  return streams().collective[device];
}

void set_device(int device) { CUDA_CHECK(cudaSetDevice(device)); }

void* malloc_device(size_t bytes, int device) {
  set_device(device);
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  CUDA_CHECK(err);
  return ptr;
}

void free_device(void* ptr, int device) noexcept {
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(ptr) != cudaSuccess) {
    fprintf(stderr, "ember: warning: cudaFree failed: %s\n", cudaGetErrorString(cudaGetLastError()));
  }
}

void* malloc_pinned(size_t bytes) {
  void* ptr = nullptr;
  cudaError_t err = cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw OutOfMemoryError(detail::concat("cannot allocate ", bytes,
                                          " bytes of pinned host memory (cudaHostAlloc). Pin smaller "
                                          "buffers or use pageable memory (--no-pin)."));
  }
  CUDA_CHECK(err);
  return ptr;
}

void free_pinned(void* ptr) noexcept {
  if (cudaFreeHost(ptr) != cudaSuccess)
    fprintf(stderr, "ember: warning: cudaFreeHost failed: %s\n", cudaGetErrorString(cudaGetLastError()));
}

void* malloc_mapped(size_t bytes, void** device_ptr) {
  void* ptr = nullptr;
  CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocMapped));
  CUDA_CHECK(cudaHostGetDevicePointer(device_ptr, ptr, 0));
  return ptr;
}

void mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) {
  set_device(device);
  CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

void memcpy(void* dst, const void* src, size_t bytes, CopyKind kind, kernels::Stream stream, bool async) {
  cudaMemcpyKind k = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                     : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                      : cudaMemcpyDeviceToDevice;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, stream));
  if (!async) CUDA_CHECK(cudaStreamSynchronize(stream));
}

void stream_synchronize(kernels::Stream stream) { CUDA_CHECK(cudaStreamSynchronize(stream)); }

void* event_create() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}
void event_destroy(void* event) noexcept { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
void event_record(void* event, kernels::Stream stream) {
  CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), stream));
}
void stream_wait_event(kernels::Stream stream, void* event) {
  CUDA_CHECK(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(event), 0));
}
void event_synchronize(void* event) { CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event))); }
void* event_create_timed() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));
  return e;
}
float event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}
int l2_cache_bytes(int device) {
  int bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device));
  return bytes;
}

#else  // no CUDA backend: every entry point explains why

namespace {
[[noreturn]] void no_cuda() { require(Device::cuda(0)); throw InternalError("unreachable"); }
}  // namespace

kernels::Stream compute_stream(int) { no_cuda(); }
kernels::Stream copy_stream(int) { no_cuda(); }
kernels::Stream collective_stream(int) { no_cuda(); }
void set_device(int) { no_cuda(); }
void* malloc_device(size_t, int) { no_cuda(); }
void free_device(void*, int) noexcept {}
void* malloc_pinned(size_t) { no_cuda(); }
void free_pinned(void*) noexcept {}
void* malloc_mapped(size_t, void**) { no_cuda(); }
void mem_get_info(int, size_t*, size_t*) { no_cuda(); }
void memcpy(void*, const void*, size_t, CopyKind, kernels::Stream, bool) { no_cuda(); }
void stream_synchronize(kernels::Stream) { no_cuda(); }
void* event_create() { no_cuda(); }
void event_destroy(void*) noexcept {}
void event_record(void*, kernels::Stream) { no_cuda(); }
void stream_wait_event(kernels::Stream, void*) { no_cuda(); }
void event_synchronize(void*) { no_cuda(); }
void* event_create_timed() { no_cuda(); }
float event_elapsed_ms(void*, void*) { no_cuda(); }
int l2_cache_bytes(int) { no_cuda(); }

#endif

}  // namespace runtime
}  // namespace ember::cuda
