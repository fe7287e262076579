// The CUDA device language for g++: qualifiers, built-in variables, vector types, warp and block
// intrinsics and atomics, each behaving as on a GPU (docs/emulation.md), strict where CUDA says "undefined".
#pragma once

#include <math.h>  // libstdc++'s wrapper: float overloads (fma, sqrt, ...) and isnan/isfinite in the global namespace

#include <atomic>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "emu/dim.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
// Bounds are checked at launch: the emulated build inserts them into the kernel's entry (emu/tools/instrument.cpp).
#define __launch_bounds__(...)
// Block-shared: every thread of a block is a fiber on one worker thread, which runs one block at a time.
#define __shared__ static thread_local

namespace emu::detail {

// What a kernel's built-in variables read; the block scheduler points it at the running thread's view.
struct ThreadView {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
// constinit: read directly, without the TLS wrapper call an extern thread_local would otherwise need.
extern constinit thread_local const ThreadView* current_view;
[[noreturn]] void outside_kernel(const char* what);
inline const ThreadView& view(const char* what) {
  if (current_view == nullptr) [[unlikely]] outside_kernel(what);
  return *current_view;
}

enum class Collective { Shfl, ShflUp, ShflDown, ShflXor, Ballot, Any, All, SyncWarp };
enum class Barrier { Sync, Or, And, Count };

// A warp collective: `value` (up to 16 bytes) goes in, the lane's result comes out.
void warp_collective(Collective kind, unsigned mask, void* value, int bytes, int arg, int width,
                     const std::source_location& where);
int block_barrier(Barrier kind, int predicate, const std::source_location& where);
[[noreturn]] void trap(const std::source_location& where);

template <typename T>
T shuffle(Collective kind, unsigned mask, T var, int arg, int width, const std::source_location& where) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "shuffles move values of up to 16 bytes");
  warp_collective(kind, mask, &var, sizeof(T), arg, width, where);
  return var;
}

}  // namespace emu::detail

#define threadIdx (::emu::detail::view("threadIdx").thread_idx)
#define blockIdx (::emu::detail::view("blockIdx").block_idx)
#define blockDim (::emu::detail::view("blockDim").block_dim)
#define gridDim (::emu::detail::view("gridDim").grid_dim)
constexpr int warpSize = 32;

// ---- block and warp synchronisation ----------------------------------------------------------------------

inline void __syncthreads(std::source_location where = std::source_location::current()) {
  ::emu::detail::block_barrier(::emu::detail::Barrier::Sync, 0, where);
}
inline int __syncthreads_or(int p, std::source_location where = std::source_location::current()) {
  return ::emu::detail::block_barrier(::emu::detail::Barrier::Or, p, where);
}
inline int __syncthreads_and(int p, std::source_location where = std::source_location::current()) {
  return ::emu::detail::block_barrier(::emu::detail::Barrier::And, p, where);
}
inline int __syncthreads_count(int p, std::source_location where = std::source_location::current()) {
  return ::emu::detail::block_barrier(::emu::detail::Barrier::Count, p, where);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location where = std::source_location::current()) {
  int unused = 0;
  ::emu::detail::warp_collective(::emu::detail::Collective::SyncWarp, mask, &unused, sizeof unused, 0, 32, where);
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32,
              std::source_location where = std::source_location::current()) {
  return ::emu::detail::shuffle(::emu::detail::Collective::Shfl, mask, var, src_lane, width, where);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                 std::source_location where = std::source_location::current()) {
  return ::emu::detail::shuffle(::emu::detail::Collective::ShflUp, mask, var, static_cast<int>(delta), width, where);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                   std::source_location where = std::source_location::current()) {
  return ::emu::detail::shuffle(::emu::detail::Collective::ShflDown, mask, var, static_cast<int>(delta), width, where);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32,
                  std::source_location where = std::source_location::current()) {
  return ::emu::detail::shuffle(::emu::detail::Collective::ShflXor, mask, var, lane_mask, width, where);
}
inline unsigned __ballot_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
  int v = predicate != 0;
  ::emu::detail::warp_collective(::emu::detail::Collective::Ballot, mask, &v, sizeof v, 0, 32, where);
  return static_cast<unsigned>(v);
}
inline int __any_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
  int v = predicate != 0;
  ::emu::detail::warp_collective(::emu::detail::Collective::Any, mask, &v, sizeof v, 0, 32, where);
  return v;
}
inline int __all_sync(unsigned mask, int predicate, std::source_location where = std::source_location::current()) {
  int v = predicate != 0;
  ::emu::detail::warp_collective(::emu::detail::Collective::All, mask, &v, sizeof v, 0, 32, where);
  return v;
}

inline void __trap(std::source_location where = std::source_location::current()) { ::emu::detail::trap(where); }
// Blocks of a grid and the host see each other's writes through these (seq_cst covers every scope).
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---- memory, atomics ---------------------------------------------------------------------------------------

template <typename T>
T __ldg(const T* p) {
  return *p;
}

// CUDA's overload sets, so a call that would not compile for a GPU (atomicAdd on a long*) does not compile here.
#define EMU_ATOMIC(name, T, body)                          \
  inline T name(T* address, T value) {                     \
    std::atomic_ref<T> a(*address);                        \
    body;                                                  \
  }
#define EMU_ATOMIC_MINMAX(name, T, better)                 \
  inline T name(T* address, T value) {                     \
    std::atomic_ref<T> a(*address);                        \
    T old = a.load();                                      \
    while (better && !a.compare_exchange_weak(old, value)) \
      ;                                                    \
    return old;                                            \
  }
#define EMU_ATOMIC_INTEGER(T)                                 \
  EMU_ATOMIC(atomicAdd, T, return a.fetch_add(value))         \
  EMU_ATOMIC(atomicExch, T, return a.exchange(value))         \
  EMU_ATOMIC(atomicAnd, T, return a.fetch_and(value))         \
  EMU_ATOMIC(atomicOr, T, return a.fetch_or(value))           \
  EMU_ATOMIC(atomicXor, T, return a.fetch_xor(value))         \
  EMU_ATOMIC_MINMAX(atomicMin, T, value < old)                \
  EMU_ATOMIC_MINMAX(atomicMax, T, old < value)                \
  inline T atomicCAS(T* address, T expected, T desired) {     \
    std::atomic_ref<T>(*address).compare_exchange_strong(expected, desired); \
    return expected; /* the old value, swapped or not */      \
  }
EMU_ATOMIC_INTEGER(int)
EMU_ATOMIC_INTEGER(unsigned)
EMU_ATOMIC_INTEGER(unsigned long long)
EMU_ATOMIC(atomicSub, int, return a.fetch_sub(value))
EMU_ATOMIC(atomicSub, unsigned, return a.fetch_sub(value))
EMU_ATOMIC_MINMAX(atomicMin, long long, value < old)
EMU_ATOMIC_MINMAX(atomicMax, long long, old < value)
EMU_ATOMIC(atomicAdd, float, return a.fetch_add(value))
EMU_ATOMIC(atomicAdd, double, return a.fetch_add(value))
EMU_ATOMIC(atomicExch, float, return a.exchange(value))
#undef EMU_ATOMIC_INTEGER
#undef EMU_ATOMIC_MINMAX
#undef EMU_ATOMIC

// ---- math intrinsics (the fast variants compute the exact function here) -----------------------------------

inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
// Round-to-nearest, never contracted into an FMA (g++ does not contract under -std=c++20 without -mfma).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, sizeof i); return i; }
inline float __int_as_float(int i) { float x; std::memcpy(&x, &i, sizeof x); return x; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, sizeof i); return i; }
inline float __uint_as_float(unsigned i) { float x; std::memcpy(&x, &i, sizeof x); return x; }
inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, sizeof i); return i; }
inline double __longlong_as_double(long long i) { double x; std::memcpy(&x, &i, sizeof x); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }

// ---- kernel entry ------------------------------------------------------------------------------------------

namespace emu {
namespace detail {
extern constinit thread_local bool probing;
[[noreturn]] void report_bounds(int max_threads_per_block);
}  // namespace detail

// The first statement of every kernel in the emulated build, inserted by emu/tools/instrument.cpp with the
// kernel's __launch_bounds__: a launch's one-time probe learns them here, before the kernel runs for real.
inline void kernel_entry(int max_threads_per_block = 0, int /*min_blocks_per_sm*/ = 0) {
  if (detail::probing) [[unlikely]] detail::report_bounds(max_threads_per_block);
}
}  // namespace emu
