// What a kernel launch carries to the emulated device, and the grid executor that runs it there.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include "emu/api.h"

namespace emu::detail {

// Learned once per kernel (instantiation) by a probe call at its first launch (emu/launch.h).
struct KernelInfo {
  std::string name;             // e.g. "block_sum_kernel<float>"
  int max_threads_per_block = 0;  // from __launch_bounds__, 0 when it has none
};

struct Launch {
  const KernelInfo* kernel = nullptr;
  dim3 grid, block;
  size_t shared_bytes = 0;
  std::function<void()> body;  // one thread's run: the kernel called with the launch's own copy of the arguments
};

// A kernel broke a rule of the execution model (barrier divergence, a bad warp mask, a trap, ...). The
// message names the rule, the kernel, the block, the thread and the source line.
class Violation : public std::runtime_error {
 public:
  Violation(cudaError_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// "(x,y,z)", for messages.
std::string dims(unsigned x, unsigned y, unsigned z);

// Checks a launch the way the runtime does before anything runs; returns the error and sets `why`.
cudaError_t check_launch(const KernelInfo& kernel, dim3 grid, dim3 block, size_t shared_bytes, std::string* why);

// Runs every block of the grid, one after the other in index order, on the calling thread.
void run_grid(const Launch& launch);

}  // namespace emu::detail
