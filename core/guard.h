// NonFiniteGuard: watches each training step's loss and gradients for NaN/Inf without a host
// synchronisation. check() queues one scan where the tensors live; the optimizer kernels given the guard
// skip the update of a flagged step; the host polls first_bad_step() for free (mapped memory on CUDA).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/guard.h"

namespace ember {

// What the checks found so far: the first and last flagged steps, how many, and which tensors (bit i: tensor i).
using GuardReport = kernels::GuardReport;
// Tensors one check may watch, and the bit of tensor i in a report's mask.
inline constexpr int kGuardMaxTensors = kernels::kGuardMaxTensors;
inline uint64_t guard_bit(int tensor) { return kernels::guard_bit(tensor); }

class NonFiniteGuard {
 public:
  // Skip: only a flagged step's update is skipped. Stop: after the first flagged step every later update
  // is skipped too, so the parameters stay as they were before it while the host comes to stop the run.
  enum class Mode { Stop, Skip };

  NonFiniteGuard(Device device, Mode mode);
  ~NonFiniteGuard();
  NonFiniteGuard(const NonFiniteGuard&) = delete;
  NonFiniteGuard& operator=(const NonFiniteGuard&) = delete;

  Device device() const { return device_; }
  Mode mode() const { return mode_; }

  // Queues the check of `step` (1-based, once per step, after backward and before the optimizer's step)
  // over `tensors`: defined, on the guard's device, one floating dtype, at most 64 (bit i of a report's
  // mask is tensors[i]).
  void check(int64_t step, const std::vector<Tensor>& tensors);
  // The first flagged step whose check has finished, 0 if none (yet). Never waits for the device.
  int64_t first_bad_step() const;
  // Waits for the device's queued work, then returns the exact report.
  GuardReport report() const;
  // Where the optimizer kernels read skip/skipped (device memory on CUDA, host memory on the CPU).
  const kernels::GuardState* state() const;

 private:
  Device device_;
  Mode mode_;
  Tensor state_;  // a zeroed kernels::GuardState, stored as 4 int64 on device_
  kernels::GuardReport* report_host_ = nullptr;    // what the host reads
  kernels::GuardReport* report_device_ = nullptr;  // the same memory as the kernel addresses it
};

}  // namespace ember
