// The AVX-512 build of cpu/attention.cpp (kernels/cpu/isa.h): the same source, its kernels in namespace cpu::avx512.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)  // EMBER_HOST_AVX512
#define EMBER_ISA_AVX512 1
#include "kernels/cpu/attention.cpp"  // NOLINT(bugprone-suspicious-include)
#endif
