// The host kernels' thread pool: each op is cut into tasks by its shape alone, and any number of threads runs them.
//
// Why results never depend on the thread count: a kernel decides how to cut its work into tasks from its
// sizes only (never from num_threads()), each task writes outputs no other task writes, and a task's
// arithmetic is the same whichever thread runs it. The threads only decide who runs which task, so
// `--threads 1` and `--threads 2` give the same bits.
//
// Who runs which task: with n threads, thread p (the caller is 0) owns the p-th of n contiguous shares of a
// region's tasks and claims them one by one, then claims what is left of the others'. So when the threads keep
// pace, consecutive ops over the same tensor give each thread the same part of it, and that part stays in its
// core's cache: a training step's optimizer update, guard scan and zero_grad touch a parameter's bytes right
// after the backward GEMM wrote them. A thread that the OS has paused (a busy machine) holds up at most the task
// it is running; the others take over the rest of its share.
//
// Usage, a kernel over n elements in chunks of a fixed grain:
//   parallel_chunks(n, 16384, [&](int64_t begin, int64_t end) { for (i = begin; i < end; ++i) ... });
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace ember::kernels::cpu {

// Threads the host kernels use, the calling thread included (1: every task runs on the caller).
int num_threads();
// Sets the thread count: 1 .. kMaxThreads, or 0 for the cores this process may run on. Throws ValueError
// for other values, and when called from inside a task. Waits for a parallel region in progress.
void set_num_threads(int threads);
// The cores this process may run on (its CPU affinity), at least 1.
int available_cores();
constexpr int kMaxThreads = 256;

// Flush denormals: results too small for a normal float become 0, and denormal inputs read as 0 (x86 FTZ and DAZ
// on the calling thread; elsewhere a no-op and flush_denormals() stays false). An SGD momentum buffer whose
// gradient stays 0 decays into the denormal range within a few hundred steps, and every multiply on a denormal
// then takes a microcode assist that slows the update severalfold. Each region's tasks run in the mode of the
// thread that opened it, so results stay the same at any thread count. Off by default (a library leaves the
// thread's floating-point mode alone); `ember` turns it on unless given --keep-denormals.
void set_flush_denormals(bool on);
bool flush_denormals();

namespace parallel_detail {
using TaskFn = void (*)(void* context, int64_t task);
// Runs call(context, t) for every t in [0, tasks); see parallel_for.
void run_tasks(int64_t tasks, TaskFn call, void* context, const char* site, double work);
bool region_profiling();  // region_profile.h
}  // namespace parallel_detail

// Calls fn(task) once for every task in [0, tasks), on the pool and the calling thread, and returns when
// all have returned. The first exception a task throws is rethrown here (tasks not yet started are then
// skipped). A region opened inside a task, or while another thread's region runs, runs on the calling
// thread alone: same tasks, same results. `site` and `work` name the region in the region profile
// (region_profile.h): by default the calling function's name and no work count.
template <typename F>
void parallel_for(int64_t tasks, F&& fn, const char* site = __builtin_FUNCTION(), double work = 0) {
  using Fn = std::remove_reference_t<F>;
  if (tasks <= 0) return;
  if (tasks == 1 && !parallel_detail::region_profiling()) {
    fn(int64_t{0});
    return;
  }
  parallel_detail::run_tasks(
      tasks, [](void* context, int64_t task) { (*static_cast<Fn*>(context))(task); },
      const_cast<void*>(static_cast<const void*>(&fn)), site, work);
}

// Elements per task of a streaming loop (fill, add, relu, optimizer updates): a few times the work a region
// costs while the workers poll, and small enough that the MLP's hidden-layer passes split across the threads
// (docs/benchmarks.md, "Measurements behind the code"). Smaller inputs run as one task on the caller.
inline constexpr int64_t kElementwiseGrain = int64_t{1} << 13;

// The number of chunks parallel_chunks cuts n elements into: ceil(n / grain), a function of the sizes only.
inline int64_t chunk_count(int64_t n, int64_t grain) { return n <= 0 ? 0 : (n + grain - 1) / grain; }

// Cuts [0, n) into chunks of `grain` elements (the last one shorter) and calls fn(begin, end) for each.
template <typename F>
void parallel_chunks(int64_t n, int64_t grain, F&& fn, const char* site = __builtin_FUNCTION()) {
  if (grain < 1) grain = 1;
  parallel_for(
      chunk_count(n, grain),
      [&](int64_t chunk) {
        const int64_t begin = chunk * grain;
        fn(begin, begin + grain < n ? begin + grain : n);
      },
      site);
}

}  // namespace ember::kernels::cpu
