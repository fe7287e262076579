// The host ISA the dual-built kernels run (kernels/cpu/isa.h).
#include "kernels/cpu/isa.h"

#include <atomic>

#include "base/error.h"

namespace ember::kernels::cpu {
namespace {

bool cpu_has_avx512() {
#if EMBER_HOST_AVX512
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return has;
#else
  return false;
#endif
}

std::atomic<bool> baseline_chosen{false};

}  // namespace

bool host_isa_available(HostIsa isa) { return isa == HostIsa::baseline || cpu_has_avx512(); }

HostIsa host_isa() {
  return cpu_has_avx512() && !baseline_chosen.load(std::memory_order_relaxed) ? HostIsa::avx512 : HostIsa::baseline;
}

void set_host_isa(HostIsa isa) {
  EMBER_CHECK(host_isa_available(isa), ValueError, "set_host_isa: ", host_isa_name(isa), " is not available here ",
              EMBER_HOST_AVX512 ? "(the CPU lacks AVX-512 F, BW, DQ or VL)" : "(not an x86-64 build by GCC)",
              "; use the baseline");
  baseline_chosen.store(isa == HostIsa::baseline, std::memory_order_relaxed);
}

const char* host_isa_name(HostIsa isa) { return isa == HostIsa::avx512 ? "AVX-512" : "baseline (SSE2)"; }

}  // namespace ember::kernels::cpu
