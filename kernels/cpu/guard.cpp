// The non-finite guard on the host: a branch-free scan per tensor in chunks on the host pool, then the shared finish.
#include <atomic>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "kernels/guard.h"

namespace ember::kernels::cpu {
namespace {

// NaN and Inf are the values whose magnitude bits (all but the sign) are at least those of +Inf, so one
// max-reduction over the magnitudes answers for a whole tensor: two integer ops per element, no branch,
// no floating-point compare, and it never stops early, so a scan costs the same whatever it finds.
template <typename T>
using Bits = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

template <typename T>
constexpr Bits<T> kInfBits = sizeof(T) == 4 ? Bits<T>(0x7f800000) : Bits<T>(0x7ff0000000000000);

template <typename T>
[[gnu::always_inline]] inline bool scan(const T* x, int64_t n) {
  constexpr Bits<T> kMagnitude = static_cast<Bits<T>>(~(uint64_t{1} << (8 * sizeof(T) - 1)));
  Bits<T> largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    Bits<T> b;
    std::memcpy(&b, x + i, sizeof b);
    b &= kMagnitude;
    largest = b > largest ? b : largest;
  }
  return largest >= kInfBits<T>;
}

// The guard reads every gradient once per step, so the scan is worth AVX2 where the CPU has it (a signed
// max over 8 lanes; the baseline x86-64 build has no packed max and emulates it with compares).
#if defined(__x86_64__) && defined(__GNUC__)
template <typename T>
[[gnu::target("avx2")]] bool scan_avx2(const T* x, int64_t n) {
  return scan(x, n);
}

template <typename T>
bool has_nonfinite(const T* x, int64_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? scan_avx2(x, n) : scan(x, n);
}
#else
template <typename T>
bool has_nonfinite(const T* x, int64_t n) {
  return scan(x, n);
}
#endif

}  // namespace

template <typename T>
void check_finite(const GuardTensors<T>& list, int64_t step, bool sticky, GuardState* state, GuardReport* report) {
  detail::check_guard_args(list, step, state, report);
  // One flag per tensor, set by any chunk that finds NaN/Inf: the answer is the same whatever the order.
  std::atomic<uint64_t> found{0};
  for (int i = 0; i < list.count; ++i)
    parallel_chunks(list.numel[i], kElementwiseGrain, [&](int64_t begin, int64_t end) {
      if (has_nonfinite(list.data[i] + begin, end - begin)) found.fetch_or(guard_bit(i), std::memory_order_relaxed);
    });
  const uint64_t mask = found.load();
  guard_finish(*state, *report, mask, step, sticky);
}

template void check_finite<float>(const GuardTensors<float>&, int64_t, bool, GuardState*, GuardReport*);
template void check_finite<double>(const GuardTensors<double>&, int64_t, bool, GuardState*, GuardReport*);

}  // namespace ember::kernels::cpu
