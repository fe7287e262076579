// The non-finite guard on the host: a branch-free scan per tensor, then the shared finish.
#include <cstring>
#include <type_traits>

#include "kernels/guard.h"

namespace ember::kernels::cpu {
namespace {

// NaN and Inf are the values whose exponent bits are all ones. Testing the bits (AND, compare, OR) keeps the
// loop free of branches and floating-point compares, so it vectorises with plain SSE2 and stops nothing early:
// the scan costs the same whether or not it finds something.
template <typename T>
bool has_nonfinite(const T* x, int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr Bits kExponent = static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  Bits found = 0;
  for (int64_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, x + i, sizeof b);
    found |= static_cast<Bits>((b & kExponent) == kExponent);
  }
  return found != 0;
}

}  // namespace

template <typename T>
void check_finite(const GuardTensors<T>& list, int64_t step, bool sticky, GuardState* state, GuardReport* report) {
  detail::check_guard_args(list, step, state, report);
  uint64_t mask = 0;
  for (int i = 0; i < list.count; ++i)
    if (has_nonfinite(list.data[i], list.numel[i])) mask |= guard_bit(i);
  guard_finish(*state, *report, mask, step, sticky);
}

template void check_finite<float>(const GuardTensors<float>&, int64_t, bool, GuardState*, GuardReport*);
template void check_finite<double>(const GuardTensors<double>&, int64_t, bool, GuardState*, GuardReport*);

}  // namespace ember::kernels::cpu
