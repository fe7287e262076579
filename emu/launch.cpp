// Kernel launches on the emulated device: the one-time probe of a kernel's launch bounds, the runtime's
// launch checks, and the grid executor (blocks in index order on the stream's worker thread).
#include "emu/launch.h"

#include <cstdio>
#include <memory>

#include "emu/block.h"
#include "emu/state.h"

namespace emu::detail {

constinit thread_local bool probing = false;

namespace {

struct ProbeResult {
  int max_threads_per_block;
};

}  // namespace

std::string dims(unsigned x, unsigned y, unsigned z) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "(%u,%u,%u)", x, y, z);
  return buf;
}

void report_bounds(int max_threads_per_block) { throw ProbeResult{max_threads_per_block}; }

std::string kernel_name(const char* pretty_function) {
  std::string s = pretty_function;
  const size_t start = s.find("Kernel = ");
  if (start == std::string::npos) return s;
  s = s.substr(start + 9, s.rfind(']') - start - 9);
  // Drop namespaces of the kernel itself (not of its template arguments): cut at the last "::" before '<'.
  const size_t open = s.find('<');
  const size_t cut = s.rfind("::", open);
  return cut == std::string::npos ? s : s.substr(cut + 2);
}

KernelInfo probe(std::string name, const std::function<void()>& call) {
  KernelInfo info;
  info.name = std::move(name);
  probing = true;
  try {
    call();
    probing = false;
    throw std::logic_error("ember emulator: kernel " + info.name +
                           " ran without reaching emu::kernel_entry: its file was not instrumented "
                           "(compile .cu files through emu/tools/instrument, docs/emulation.md)");
  } catch (const ProbeResult& r) {
    info.max_threads_per_block = r.max_threads_per_block;
  }
  probing = false;
  return info;
}

cudaError_t check_launch(const KernelInfo& kernel, dim3 grid, dim3 block, size_t shared_bytes, std::string* why) {
  const auto threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
  const std::string what = "launch of " + kernel.name + " with grid " + dims(grid.x, grid.y, grid.z) + " and block " + dims(block.x, block.y, block.z);
  if (threads == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    *why = what + ": an empty grid or block";
    return cudaErrorInvalidConfiguration;
  }
  if (block.x > 1024 || block.y > 1024 || block.z > 64 || threads > 1024) {
    *why = what + ": " + std::to_string(threads) + " threads per block (at most 1024; x, y <= 1024, z <= 64)";
    return cudaErrorInvalidConfiguration;
  }
  if (grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    *why = what + ": the grid is larger than 2^31-1 x 65535 x 65535";
    return cudaErrorInvalidConfiguration;
  }
  if (shared_bytes > 48 * 1024) {
    *why = what + ": " + std::to_string(shared_bytes) + " bytes of dynamic shared memory, more than 48 KiB";
    return cudaErrorInvalidConfiguration;
  }
  if (kernel.max_threads_per_block > 0 && threads > static_cast<unsigned long long>(kernel.max_threads_per_block)) {
    *why = what + ": " + std::to_string(threads) + " threads per block, but its __launch_bounds__ allow " +
           std::to_string(kernel.max_threads_per_block);
    return cudaErrorLaunchOutOfResources;
  }
  return cudaSuccess;
}

void submit(Launch&& launch, cudaStream_t handle) {
  if (device_failed()) {
    result(cudaSuccess);  // records the failure as the last error
    return;
  }
  Stream* stream = stream_of(handle);
  if (stream == nullptr) {
    result(cudaErrorInvalidResourceHandle, "launch of " + launch.kernel->name + " on an unknown stream");
    return;
  }
  std::string why;
  if (const cudaError_t e = check_launch(*launch.kernel, launch.grid, launch.block, launch.shared_bytes, &why);
      e != cudaSuccess) {
    result(e, why);
    return;
  }
  auto shared = std::make_shared<const Launch>(std::move(launch));
  enqueue(stream, Task{[shared] { run_grid(*shared); }});
}

void run_grid(const Launch& launch) {
  thread_local std::unique_ptr<Block> block = std::make_unique<Block>();
  for (unsigned z = 0; z < launch.grid.z; ++z)
    for (unsigned y = 0; y < launch.grid.y; ++y)
      for (unsigned x = 0; x < launch.grid.x; ++x) block->run(launch, uint3{x, y, z});
}

}  // namespace emu::detail
