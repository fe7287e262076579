// IsaScope: runs the dual-built host kernels (kernels/cpu/isa.h) as one build for one test, then restores the choice.
#pragma once

#include "kernels/cpu/isa.h"

namespace ember::test {

class IsaScope {
 public:
  explicit IsaScope(kernels::cpu::HostIsa isa) : saved_(kernels::cpu::host_isa()) { kernels::cpu::set_host_isa(isa); }
  ~IsaScope() { kernels::cpu::set_host_isa(saved_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  kernels::cpu::HostIsa saved_;
};

}  // namespace ember::test
