// Host kernels built twice: as the rest of ember, for any x86-64 (SSE2), and for AVX-512, in namespace
// cpu::avx512 of the same source (the cpu/*_avx512.cpp files include it with EMBER_ISA_AVX512 defined). The
// baseline entry points hand each call to the AVX-512 build where the CPU has it; both give the same bits (the
// compiler contracts no multiply-add and reorders no sum, so only the vector width changes), which
// tests/kernels/test_batchnorm_pool.cpp and tests/nn/test_transformer.cpp check. Only the kernels whose loops gain
// from the wider vectors are built twice: BatchNorm, pooling, LayerNorm and attention.
//
// In a dual-built source: everything of the kernels sits between EMBER_ISA_BEGIN and EMBER_ISA_END (after the
// includes, inside namespace cpu), and each entry point starts with EMBER_ISA_DISPATCH(its call). Templates from
// headers that run a loop body (stream_row) are always inlined, so the body is compiled for the caller's ISA.
#pragma once

namespace ember::kernels::cpu {

enum class HostIsa { baseline, avx512 };

// Whether this build and CPU can run `isa`: AVX-512 needs an x86-64 build by GCC and a CPU with AVX-512 F, BW, DQ
// and VL.
bool host_isa_available(HostIsa isa);
// The build the dual-built kernels run: AVX-512 where available, unless set_host_isa chose the baseline.
HostIsa host_isa();
// Picks the build (tests and benchmarks compare them); ValueError naming the missing features for one that is not
// available.
void set_host_isa(HostIsa isa);
const char* host_isa_name(HostIsa isa);  // "baseline (SSE2)", "AVX-512"

}  // namespace ember::kernels::cpu

// GCC's target pragmas make the AVX-512 build; other compilers get the baseline alone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define EMBER_HOST_AVX512 1
#else
#define EMBER_HOST_AVX512 0
#endif

#if defined(EMBER_ISA_AVX512)
#define EMBER_ISA_BEGIN                  \
  namespace avx512 {                     \
  _Pragma("GCC push_options")            \
  _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,bmi,bmi2,popcnt\")")
#define EMBER_ISA_END _Pragma("GCC pop_options") }
#define EMBER_ISA_DISPATCH(call)
#elif EMBER_HOST_AVX512
#define EMBER_ISA_BEGIN
#define EMBER_ISA_END
#define EMBER_ISA_DISPATCH(call) \
  if (host_isa() == HostIsa::avx512) return avx512::call
#else
#define EMBER_ISA_BEGIN
#define EMBER_ISA_END
#define EMBER_ISA_DISPATCH(call)
#endif
