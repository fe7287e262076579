// core's thin, CUDA-type-free wrapper over the CUDA runtime (streams, raw memory, copies).
// Without the CUDA backend every call throws DeviceUnavailableError; device_count() returns 0.
#pragma once

#include <cstddef>

#include "kernels/common.h"

namespace ember::cuda::runtime {

// The stream ember queues all work for `device` on (created on first use, non-blocking).
kernels::Stream compute_stream(int device);
// A second stream per device for input copies that overlap compute (the DataLoader's).
kernels::Stream copy_stream(int device);
// A third for collectives between ranks (dist/'s NCCL all-reduce of gradient buckets during backward).
kernels::Stream collective_stream(int device);
void set_device(int device);

// cudaMalloc; returns nullptr when the GPU is out of memory, throws CudaError on other failures.
void* malloc_device(size_t bytes, int device);
void free_device(void* ptr, int device) noexcept;
void* malloc_pinned(size_t bytes);
void free_pinned(void* ptr) noexcept;
// Pinned host memory the GPU can write directly (zero-copy); *device_ptr is its device address.
void* malloc_mapped(size_t bytes, void** device_ptr);
void mem_get_info(int device, size_t* free_bytes, size_t* total_bytes);

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
// Queues a copy on `stream`; when !async also waits for that stream to finish.
void memcpy(void* dst, const void* src, size_t bytes, CopyKind kind, kernels::Stream stream, bool async);
void stream_synchronize(kernels::Stream stream);

// Events order one stream after another without blocking the host.
void* event_create();
void event_destroy(void* event) noexcept;
void event_record(void* event, kernels::Stream stream);
void stream_wait_event(kernels::Stream stream, void* event);
void event_synchronize(void* event);
// Events that record time, for benchmarks: milliseconds between two recorded events.
void* event_create_timed();
float event_elapsed_ms(void* start, void* end);
// Bytes of the device's L2 cache (for flushing it between benchmark repetitions).
int l2_cache_bytes(int device);

}  // namespace ember::cuda::runtime
