// Host embedding: every id checked before any row is read or written, a gather of whole rows in chunks of the host
// pool, and a scatter-add whose tasks own ranges of vocabulary rows (bits independent of the thread count).
#include "kernels/embedding.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace ember::kernels::cpu {

namespace {

// Vocabulary ranges a large backward is cut into: each task scans all n ids, so few (the host has 2 cores here).
constexpr int64_t kBackwardTasks = 8;

// Rows per task: about kElementwiseGrain elements, from the sizes alone.
int64_t rows_per_chunk(int64_t cols) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, cols)); }

// The first id outside [0, V) is an error, before anything is read or written. The flag loop has no early exit
// so it vectorises; the slow search for the position runs only when there is one.
template <typename I> void check_ids(const char* op, const I* ids, int64_t n, int64_t V) {
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) bad |= static_cast<int64_t>(ids[i]) < 0 || static_cast<int64_t>(ids[i]) >= V;
  if (!bad) return;
  for (int64_t i = 0; i < n; ++i) {
    const auto id = static_cast<int64_t>(ids[i]);
    if (id < 0 || id >= V) throw ValueError(embedding_bad_id_message(op, id, i, V));
  }
}

}  // namespace

template <typename T, typename I>
void embedding_forward(const T* weight, const I* ids, T* out, int64_t n, int64_t V, int64_t E) {
  check_ids("embedding", ids, n, V);
  if (n <= 0 || E <= 0) return;
  parallel_chunks(n, rows_per_chunk(E), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const T* row = weight + static_cast<int64_t>(ids[i]) * E;
      std::copy(row, row + E, out + i * E);
    }
  });
}

template <typename T, typename I>
void embedding_backward(const T* grad_out, const I* ids, T* grad_weight, int64_t n, int64_t V, int64_t E) {
  check_ids("embedding_backward", ids, n, V);
  if (n <= 0 || E <= 0) return;
  // Every row gets its contributions in the order of i whatever the cut: the cut only spreads the rows over tasks.
  const int64_t tasks = n * E < kElementwiseGrain ? 1 : std::min(V, kBackwardTasks);
  const int64_t rows_per_task = (V + tasks - 1) / tasks;
  parallel_for(tasks, [&](int64_t task) {
    const int64_t first = task * rows_per_task, last = std::min(V, first + rows_per_task);
    for (int64_t i = 0; i < n; ++i) {
      const auto id = static_cast<int64_t>(ids[i]);
      if (id < first || id >= last) continue;
      T* row = grad_weight + id * E;
      const T* g = grad_out + i * E;
      for (int64_t c = 0; c < E; ++c) row[c] += g[c];
    }
  });
}

#define EMBER_EMBEDDING_CPU(T, I)                                                                  \
  template void embedding_forward<T, I>(const T*, const I*, T*, int64_t, int64_t, int64_t);      \
  template void embedding_backward<T, I>(const T*, const I*, T*, int64_t, int64_t, int64_t);
EMBER_EMBEDDING_CPU(float, int32_t)
EMBER_EMBEDDING_CPU(float, int64_t)
EMBER_EMBEDDING_CPU(double, int32_t)
EMBER_EMBEDDING_CPU(double, int64_t)
#undef EMBER_EMBEDDING_CPU

}  // namespace ember::kernels::cpu
