// parallel_ranges: splits [0, n) into contiguous ranges, one per thread OpenBLAS is set to use, for the CNN's
// memory-bound host kernels, which would otherwise leave the second core spinning in OpenBLAS's idle loop.
// Every item is computed by one thread in the serial order, so results never depend on the thread count.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace ember::kernels::cpu {

// fn(begin, end) over ranges of at least `min_items` (fewer threads for small n); the caller runs the
// first range. An exception in any range is rethrown here after every thread has finished.
template <typename F> void parallel_ranges(int64_t n, int64_t min_items, F&& fn) {
  const int64_t threads =
      std::clamp<int64_t>(std::min<int64_t>(openblas_get_num_threads(), n / std::max<int64_t>(min_items, 1)), 1, 64);
  if (threads <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  auto run = [&](int64_t t) {
    try {
      fn(n * t / threads, n * (t + 1) / threads);
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t) workers.emplace_back(run, t);
  run(0);
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace ember::kernels::cpu
