// Non-finite guard: one pass over a training step's loss and gradients that flags NaN/Inf where the
// tensors live, so the fused optimizer kernels skip the update without the host waiting for the GPU
// (PyTorch's found_inf idea), and the host learns of it from a small report it can poll for free.
#pragma once

#include <cstdint>

#include "base/error.h"
#include "kernels/common.h"

namespace ember::kernels {

constexpr int kGuardMaxTensors = 64;

// Lives with the tensors (device memory on CUDA); starts zeroed. The optimizer kernels read skip and skipped.
struct GuardState {
  int64_t skip;          // 1: the update of the step just checked must not be applied
  int64_t skipped;       // non-finite steps so far: AdamW's bias corrections count only applied steps
  uint64_t mask;         // scratch of the CUDA check, 0 between checks
  uint32_t blocks_done;  // scratch of the CUDA check, 0 between checks
  uint32_t stopped;      // a non-finite step has been seen
};
static_assert(sizeof(GuardState) == 32, "GuardState is stored as four int64 words");

// What the host reads (mapped host memory on CUDA); starts zeroed, written only for a non-finite step.
struct GuardReport {
  int64_t first_step;   // the first non-finite step, 0 while there is none
  uint64_t first_mask;  // which tensors of that step's list: bit i = tensor i (bit 63 also covers later ones)
  int64_t last_step;    // the latest non-finite step
  int64_t count;        // non-finite steps seen
};

// The tensors of one check, passed to the kernel by value (one launch for all of them).
template <typename T>
struct GuardTensors {
  const T* data[kGuardMaxTensors];
  int64_t numel[kGuardMaxTensors];
  int count;
};

EMBER_HOST_DEVICE inline uint64_t guard_bit(int tensor) { return uint64_t{1} << (tensor < 63 ? tensor : 63); }

// Closes the check of `step` once `mask` (the non-finite tensors) is known. With `sticky` (stop mode) every
// later update is skipped as well, so the parameters stay as they were before the first non-finite step.
EMBER_HOST_DEVICE inline void guard_finish(GuardState& s, GuardReport& r, uint64_t mask, int64_t step, bool sticky) {
  if (mask != 0) {
    s.skipped += 1;
    s.stopped = 1;
    if (r.first_step == 0) {
      r.first_mask = mask;
      r.first_step = step;
    }
    r.last_step = step;
    r.count += 1;
  }
  s.skip = (mask != 0 || (sticky && s.stopped != 0)) ? 1 : 0;
}

namespace detail {
// The argument rules both twins share.
template <typename T>
void check_guard_args(const GuardTensors<T>& list, int64_t step, const GuardState* state, const GuardReport* report) {
  EMBER_ASSERT(list.count >= 0 && list.count <= kGuardMaxTensors, "check_finite: ", list.count, " tensors (at most ",
               kGuardMaxTensors, ")");
  for (int i = 0; i < list.count; ++i)
    EMBER_ASSERT(list.numel[i] >= 0 && (list.numel[i] == 0 || list.data[i] != nullptr), "check_finite: tensor ", i,
                 " has ", list.numel[i], " elements at ", static_cast<const void*>(list.data[i]));
  EMBER_ASSERT(state != nullptr && report != nullptr, "check_finite: no guard state or report");
  EMBER_CHECK(step >= 1, ValueError, "non-finite guard: steps are 1-based (got ", step, ")");
}
}  // namespace detail

// Checks every element of the listed tensors for step `step` (1-based) and updates state and report.
namespace cpu {
template <typename T>
void check_finite(const GuardTensors<T>& list, int64_t step, bool sticky, GuardState* state, GuardReport* report);
}  // namespace cpu

namespace cuda {
// state in device memory, report at a device address of mapped host memory; no host synchronisation.
template <typename T>
void check_finite(const GuardTensors<T>& list, int64_t step, bool sticky, GuardState* state, GuardReport* report,
                  Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
