// The emulated CUDA runtime: devices and their properties, errors, streams and events.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "emu/api.h"
#include "emu/state.h"

namespace emu::detail {

namespace {

struct Device {
  std::shared_ptr<Stream> legacy;
  // Created by cudaStreamCreate*, not yet destroyed. Shared: a stream destroyed while another thread
  // synchronises the device, or while the legacy stream still has to wait for it, lives until they are done.
  std::map<Stream*, std::shared_ptr<Stream>> streams;
};

struct Runtime {
  std::mutex mutex;
  std::vector<Device> devices;
  std::map<CUevent_st*, std::shared_ptr<Event>> events;
  // The sticky failure.
  std::mutex failure_mutex;
  cudaError_t failure = cudaSuccess;
  std::string failure_message;
};

// Created on first use and never destroyed: stream workers may still run while static destructors do.
Runtime& runtime() {
  static Runtime* r = [] {
    auto* rt = new Runtime;
    rt->devices.resize(static_cast<size_t>(device_count()));
    for (int d = 0; d < device_count(); ++d)
      rt->devices[static_cast<size_t>(d)].legacy = std::make_shared<Stream>(d, /*blocking=*/true, /*legacy=*/true);
    return rt;
  }();
  return *r;
}

thread_local int this_thread_device = 0;
thread_local cudaError_t last_error = cudaSuccess;
// The message of this thread's latest error, for cudaGetErrorString.
thread_local cudaError_t message_code = cudaSuccess;
thread_local std::string message;

size_t parse_bytes(const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  switch (end != nullptr ? *end : '\0') {
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    case 'M': case 'm': v *= 1024.0 * 1024; break;
    case 'K': case 'k': v *= 1024.0; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

struct ErrorText {
  const char* name;
  const char* text;
};

ErrorText error_text(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return {"cudaSuccess", "no error"};
    case cudaErrorInvalidValue: return {"cudaErrorInvalidValue", "invalid argument"};
    case cudaErrorMemoryAllocation: return {"cudaErrorMemoryAllocation", "out of memory"};
    case cudaErrorInitializationError: return {"cudaErrorInitializationError", "initialization error"};
    case cudaErrorInvalidConfiguration: return {"cudaErrorInvalidConfiguration", "invalid configuration argument"};
    case cudaErrorInvalidDevicePointer: return {"cudaErrorInvalidDevicePointer", "invalid device pointer"};
    case cudaErrorInvalidMemcpyDirection: return {"cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"};
    case cudaErrorInsufficientDriver:
      return {"cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"};
    case cudaErrorNoDevice: return {"cudaErrorNoDevice", "no CUDA-capable device is detected"};
    case cudaErrorInvalidDevice: return {"cudaErrorInvalidDevice", "invalid device ordinal"};
    case cudaErrorInvalidResourceHandle: return {"cudaErrorInvalidResourceHandle", "invalid resource handle"};
    case cudaErrorNotReady: return {"cudaErrorNotReady", "device not ready"};
    case cudaErrorIllegalAddress: return {"cudaErrorIllegalAddress", "an illegal memory access was encountered"};
    case cudaErrorLaunchOutOfResources:
      return {"cudaErrorLaunchOutOfResources", "too many resources requested for launch"};
    case cudaErrorAssert: return {"cudaErrorAssert", "device-side assert triggered"};
    case cudaErrorIllegalInstruction: return {"cudaErrorIllegalInstruction", "an illegal instruction was encountered"};
    case cudaErrorLaunchFailure: return {"cudaErrorLaunchFailure", "unspecified launch failure"};
    case cudaErrorUnknown: return {"cudaErrorUnknown", "unknown error"};
  }
  return {"cudaErrorUnknown", "unrecognized error code"};
}

Stream* checked_stream(cudaStream_t handle, cudaError_t* error) {
  Stream* s = stream_of(handle);
  *error = s == nullptr ? cudaErrorInvalidResourceHandle : cudaSuccess;
  return s;
}

std::shared_ptr<Event> event_of(cudaEvent_t handle) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto it = rt.events.find(handle);
  return it == rt.events.end() ? nullptr : it->second;
}

}  // namespace

bool device_failed() {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.failure_mutex);
  return rt.failure != cudaSuccess;
}

void fail_device(cudaError_t code, const std::string& text) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.failure_mutex);
  if (rt.failure != cudaSuccess) return;
  rt.failure = code;
  rt.failure_message = error_text(code).text + std::string(" (") + text + ")";
}

void clear_device_failure() {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.failure_mutex);
  rt.failure = cudaSuccess;
  rt.failure_message.clear();
}

cudaError_t result(cudaError_t code, const std::string& text) {
  if (code == cudaSuccess) {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.failure_mutex);
    code = rt.failure;
  } else if (!text.empty()) {
    message_code = code;
    message = error_text(code).text + std::string(" (ember emulator: ") + text + ")";
  }
  if (code != cudaSuccess) last_error = code;
  return code;
}

int device_count() {
  static const int count = [] {
    const char* env = std::getenv("EMBER_EMU_DEVICES");
    return env != nullptr ? std::atoi(env) : 1;
  }();
  return count;
}

int current_device() { return this_thread_device; }

size_t device_memory_bytes() {
  static const size_t bytes = [] {
    const char* env = std::getenv("EMBER_EMU_MEMORY");
    return env != nullptr ? parse_bytes(env) : size_t{8} << 30;
  }();
  return bytes;
}

Stream* stream_of(cudaStream_t handle) {
  Runtime& rt = runtime();
  if (handle == nullptr) return rt.devices.empty() ? nullptr : rt.devices[static_cast<size_t>(current_device())].legacy.get();
  auto* s = reinterpret_cast<Stream*>(handle);
  std::lock_guard<std::mutex> lock(rt.mutex);
  for (Device& d : rt.devices)
    if (d.streams.count(s) != 0) return s;
  return nullptr;
}

// The legacy default stream waits for the work already queued on every blocking stream of its device, and a
// blocking stream waits for the work already queued on the legacy stream (CUDA's implicit synchronisation).
uint64_t enqueue(Stream* stream, Task task) {
  Runtime& rt = runtime();
  Device& d = rt.devices[static_cast<size_t>(stream->device())];
  auto wait_for = [](std::shared_ptr<Stream> other) {
    const uint64_t position = other->enqueued();
    return Task{[other = std::move(other), position] { other->wait_until(position); }, /*is_work=*/false};
  };
  if (stream->legacy()) {
    std::vector<std::shared_ptr<Stream>> blocking;
    {
      std::lock_guard<std::mutex> lock(rt.mutex);
      for (const auto& [raw, s] : d.streams)
        if (s->blocking() && !s->idle()) blocking.push_back(s);
    }
    for (auto& s : blocking) stream->enqueue(wait_for(std::move(s)));
  } else if (stream->blocking() && !d.legacy->idle()) {
    stream->enqueue(wait_for(d.legacy));
  }
  return stream->enqueue(std::move(task));
}

void synchronize_device(int device) {
  Runtime& rt = runtime();
  Device& d = rt.devices[static_cast<size_t>(device)];
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard<std::mutex> lock(rt.mutex);
    for (const auto& [raw, s] : d.streams) all.push_back(s);
  }
  for (const auto& s : all) s->kick();  // all at once: one may wait for another
  for (const auto& s : all) s->synchronize();
  d.legacy->synchronize();
}

}  // namespace emu::detail

using namespace emu::detail;

// ---- errors and versions -----------------------------------------------------------------------------------

cudaError_t cudaGetLastError() {
  const cudaError_t e = cudaPeekAtLastError();
  if (!device_failed()) last_error = cudaSuccess;  // a sticky failure stays
  return e;
}

cudaError_t cudaPeekAtLastError() {
  if (device_failed()) return result(cudaSuccess);
  return last_error;
}

const char* cudaGetErrorName(cudaError_t error) { return error_text(error).name; }

const char* cudaGetErrorString(cudaError_t error) {
  Runtime& rt = runtime();
  {
    std::lock_guard<std::mutex> lock(rt.failure_mutex);
    if (rt.failure != cudaSuccess && error == rt.failure) return rt.failure_message.c_str();
  }
  if (error == message_code && !message.empty()) return message.c_str();
  return error_text(error).text;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return result(cudaErrorInvalidValue);
  *version = 13000;
  return result(cudaSuccess);
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return result(cudaErrorInvalidValue);
  *version = 13000;
  return result(cudaSuccess);
}

// ---- devices -----------------------------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return result(cudaErrorInvalidValue);
  *count = device_count();
  if (*count == 0) return result(cudaErrorNoDevice, "EMBER_EMU_DEVICES=0: the emulator offers no device");
  return result(cudaSuccess);
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return result(cudaErrorInvalidValue);
  *device = current_device();
  return result(cudaSuccess);
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return result(cudaErrorInvalidDevice);
  this_thread_device = device;
  return result(cudaSuccess);
}

// The properties of the GPU ember targets (an H200, sm_90), so kernels choose the same configurations they
// would choose there; the name says what it really is.
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return result(cudaErrorInvalidValue);
  if (device < 0 || device >= device_count()) return result(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "ember CUDA emulator on the CPU (not a GPU)", sizeof prop->name - 1);
  prop->totalGlobalMem = device_memory_bytes();
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = 227 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->canMapHostMemory = 1;
  prop->unifiedAddressing = 1;
  prop->asyncEngineCount = 2;
  prop->concurrentKernels = 1;
  return result(cudaSuccess);
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (value == nullptr) return result(cudaErrorInvalidValue);
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return result(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    default: return result(cudaErrorInvalidValue, "device attribute " + std::to_string(attr) + " is not emulated");
  }
  return result(cudaSuccess);
}

cudaError_t cudaDeviceSynchronize() {
  synchronize_device(current_device());
  return result(cudaSuccess);
}

// Waits for all work, frees every device allocation of the current device and clears a failure.
cudaError_t cudaDeviceReset() {
  synchronize_device(current_device());
  release_device_memory(current_device());
  clear_device_failure();
  last_error = cudaSuccess;
  return cudaSuccess;
}

// ---- streams -----------------------------------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (stream == nullptr || (flags & ~cudaStreamNonBlocking) != 0) return result(cudaErrorInvalidValue);
  Runtime& rt = runtime();
  auto s = std::make_shared<Stream>(current_device(), (flags & cudaStreamNonBlocking) == 0, /*legacy=*/false);
  {
    std::lock_guard<std::mutex> lock(rt.mutex);
    rt.devices[static_cast<size_t>(current_device())].streams.emplace(s.get(), s);
  }
  *stream = reinterpret_cast<cudaStream_t>(s.get());
  return result(cudaSuccess);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return result(cudaErrorInvalidResourceHandle);
  cudaError_t e;
  Stream* s = checked_stream(stream, &e);
  if (s == nullptr) return result(e);
  Runtime& rt = runtime();
  std::shared_ptr<Stream> owned;
  {
    std::lock_guard<std::mutex> lock(rt.mutex);
    auto& streams = rt.devices[static_cast<size_t>(s->device())].streams;
    auto it = streams.find(s);
    if (it == streams.end()) return result(cudaErrorInvalidResourceHandle);  // destroyed by another thread
    owned = std::move(it->second);
    streams.erase(it);
  }
  owned.reset();  // the last owner runs what is still queued, then stops the worker
  return result(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cudaError_t e;
  Stream* s = checked_stream(stream, &e);
  if (s == nullptr) return result(e);
  s->synchronize();
  return result(cudaSuccess);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  cudaError_t e;
  Stream* s = checked_stream(stream, &e);
  if (s == nullptr) return result(e);
  s->kick();
  return s->idle() ? result(cudaSuccess) : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  cudaError_t e;
  Stream* s = checked_stream(stream, &e);
  std::shared_ptr<Event> ev = event_of(event);
  if (s == nullptr || ev == nullptr) return result(s == nullptr ? e : cudaErrorInvalidResourceHandle);
  if (flags != 0) return result(cudaErrorInvalidValue);
  Stream* source = nullptr;
  const uint64_t generation = ev->latest(&source);
  if (generation == 0) return result(cudaSuccess);  // never recorded: nothing to wait for
  // The source stream is started only when the waiting stream reaches the wait, not before.
  enqueue(s, Task{[ev, source, generation] {
                    source->kick();
                    ev->wait_for(generation);
                  },
                  /*is_work=*/false});
  return result(cudaSuccess);
}

// ---- events ------------------------------------------------------------------------------------------------

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (event == nullptr || (flags & ~(cudaEventBlockingSync | cudaEventDisableTiming)) != 0)
    return result(cudaErrorInvalidValue);
  auto ev = std::make_shared<Event>((flags & cudaEventDisableTiming) == 0);
  auto* handle = reinterpret_cast<CUevent_st*>(ev.get());
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.events[handle] = std::move(ev);
  *event = handle;
  return result(cudaSuccess);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  return result(rt.events.erase(event) == 1 ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  cudaError_t e;
  Stream* s = checked_stream(stream, &e);
  std::shared_ptr<Event> ev = event_of(event);
  if (s == nullptr || ev == nullptr) return result(s == nullptr ? e : cudaErrorInvalidResourceHandle);
  enqueue(s, ev->record(s));
  return result(cudaSuccess);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::shared_ptr<Event> ev = event_of(event);
  if (ev == nullptr) return result(cudaErrorInvalidResourceHandle);
  Stream* source = nullptr;
  const uint64_t generation = ev->latest(&source);
  if (generation == 0) return result(cudaSuccess);
  source->kick();
  ev->wait_for(generation);
  return result(cudaSuccess);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  std::shared_ptr<Event> ev = event_of(event);
  if (ev == nullptr) return result(cudaErrorInvalidResourceHandle);
  Stream* source = nullptr;
  const uint64_t generation = ev->latest(&source);
  if (generation == 0) return result(cudaSuccess);
  source->kick();
  return ev->completed(generation) ? result(cudaSuccess) : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  std::shared_ptr<Event> a = event_of(start), b = event_of(end);
  if (ms == nullptr) return result(cudaErrorInvalidValue);
  if (a == nullptr || b == nullptr || !a->timing() || !b->timing())
    return result(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime needs two events created with timing");
  const uint64_t ga = a->latest(nullptr), gb = b->latest(nullptr);
  if (ga == 0 || gb == 0) return result(cudaErrorInvalidResourceHandle, "an event was never recorded");
  if (!a->completed(ga) || !b->completed(gb)) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(b->when() - a->when()).count();
  return result(cudaSuccess);
}
