// The host side of the CPU backend, as code above core sets and reads it (torch.set_num_threads and friends): how
// many threads the host kernels use, whether they flush denormal floats, the BLAS under the GEMMs, the ISA of the
// kernels built twice, a profile of the pool's parallel regions, and the pool itself for host loops of the layers
// above (the data loader's batch gather).
// kernels/cpu/parallel.h says why results are the same at any thread count.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "kernels/linear.h"
#include "kernels/cpu/region_profile.h"

namespace ember {

// Threads the host kernels use, the calling thread included.
inline int num_threads() { return kernels::cpu::num_threads(); }
// 1 .. 256, or 0 for every core this process may run on; ValueError otherwise.
inline void set_num_threads(int threads) { kernels::cpu::set_num_threads(threads); }
// The cores this process may run on (its CPU affinity), at least 1.
inline int available_cores() { return kernels::cpu::available_cores(); }

// Denormal floats flushed to zero on the calling thread (x86 FTZ/DAZ), inherited by threads started after:
// set it before the first kernel runs. ember's CLI does (--keep-denormals does not).
inline void set_flush_denormals(bool on) { kernels::cpu::set_flush_denormals(on); }
inline bool flush_denormals() { return kernels::cpu::flush_denormals(); }

// OpenBLAS's build string, and its threads inside one GEMM tile (1).
inline std::string blas_config() { return kernels::cpu::blas_config(); }
inline int blas_threads() { return kernels::cpu::blas_threads(); }

// The build of the host kernels built twice (BatchNorm, pooling, LayerNorm, attention; kernels/cpu/isa.h) that runs:
// "AVX-512" or "baseline (SSE2)".
inline const char* host_kernels_isa() { return kernels::cpu::host_isa_name(kernels::cpu::host_isa()); }
// Whether that build is AVX-512, which also runs ember's own convolution products (kernels/cpu/conv_packed.h).
inline bool host_kernels_avx512() { return kernels::cpu::host_isa() == kernels::cpu::HostIsa::avx512; }

// Where the pool's time goes, region by region (`ember train --profile-regions`).
using RegionStats = kernels::cpu::RegionStats;
using RegionProfile = kernels::cpu::RegionProfile;
inline void set_region_profiling(bool on) { kernels::cpu::set_region_profiling(on); }
inline RegionProfile region_profile() { return kernels::cpu::region_profile(); }

// Elements per task of a streaming host loop: a few microseconds of work, several times a region's cost.
inline constexpr int64_t kParallelGrain = kernels::cpu::kElementwiseGrain;
// Calls fn(begin, end) for chunks of `grain` elements of [0, n) on the pool; the chunks depend on n and grain
// alone, so each one's result is the same at any thread count.
template <typename F>
void parallel_chunks(int64_t n, int64_t grain, F&& fn, const char* site = __builtin_FUNCTION()) {
  kernels::cpu::parallel_chunks(n, grain, std::forward<F>(fn), site);
}

}  // namespace ember
