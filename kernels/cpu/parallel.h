// parallel_ranges: splits [0, n) into contiguous ranges, one per thread OpenBLAS is set to use, for the CNN's
// memory-bound host kernels, which would otherwise leave the second core idle. Every item is computed by
// one thread in the serial order, so results never depend on the thread count.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <functional>

namespace ember::kernels::cpu {

namespace workers {
// Runs part(t) for t in [0, parts) on persistent worker threads (the caller runs part 0) and returns when
// all are done; an exception from any part is rethrown here. A part must not call run_parts itself (jobs
// take turns, so that would wait for itself). In kernels/cpu/parallel.cpp.
void run_parts(int64_t parts, const std::function<void(int64_t)>& part);
}  // namespace workers

// fn(begin, end) over ranges of at least `min_items` (fewer threads for small n).
template <typename F> void parallel_ranges(int64_t n, int64_t min_items, F&& fn) {
  const int64_t threads =
      std::clamp<int64_t>(std::min<int64_t>(openblas_get_num_threads(), n / std::max<int64_t>(min_items, 1)), 1, 64);
  if (threads <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  workers::run_parts(threads, [&](int64_t t) { fn(n * t / threads, n * (t + 1) / threads); });
}

}  // namespace ember::kernels::cpu
