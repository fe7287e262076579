// The pool behind parallel_for: persistent workers that spin briefly between regions, then sleep.
#include "kernels/cpu/parallel.h"

#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/region_profile.h"

namespace ember::kernels::cpu {
namespace {

// A training step opens a dozen regions separated by serial work, so a worker keeps polling this long before it
// sleeps: waking a sleeping thread costs tens of microseconds on a VM, and a worker preempted by the host
// comes back with its budget spent. A shorter budget let workers sleep between a step's regions
// (docs/benchmarks.md, "Measurements behind the code").
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(1000);
// The caller, its own tasks done, polls for the workers' tasks this long before it yields its core (on a
// busy machine the worker it waits for may need that core).
constexpr auto kSpinBeforeYield = std::chrono::microseconds(50);

// Set on pool workers, and on a caller while its region runs: a region opened there runs inline.
thread_local bool t_in_region = false;

// The floating-point mode bits a region's tasks inherit from its caller: MXCSR's flush-to-zero and
// denormals-are-zero on x86, nothing elsewhere.
#if defined(__x86_64__) || defined(__i386__)
constexpr unsigned kDenormalBits = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)
unsigned fp_mode() { return _mm_getcsr() & kDenormalBits; }
void set_fp_mode(unsigned mode) {
  const unsigned csr = _mm_getcsr();
  if ((csr & kDenormalBits) != mode) _mm_setcsr((csr & ~kDenormalBits) | mode);
}
#else
constexpr unsigned kDenormalBits = 0;
unsigned fp_mode() { return 0; }
void set_fp_mode(unsigned) {}
#endif

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `done` with pauses; after `budget`, calls `slow` between polls (yield or sleep).
template <typename Done, typename Slow>
void poll_until(Done done, std::chrono::microseconds budget, Slow slow) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; !done(); ++i) {
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start > budget) {
      while (!done()) slow();
      return;
    }
  }
}

// Marks the calling thread as inside a region until destroyed (and restores what it was).
class RegionScope {
 public:
  RegionScope() : outer_(std::exchange(t_in_region, true)) {}
  ~RegionScope() { t_in_region = outer_; }
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;

 private:
  bool outer_;
};

// Returns the tasks run (all of them), like Pool::run.
int64_t run_inline(int64_t tasks, parallel_detail::TaskFn call, void* context) {
  RegionScope scope;
  for (int64_t t = 0; t < tasks; ++t) call(context, t);
  return tasks;
}

// The job word: epoch (bits 32-63), open flag (bit 31), workers inside the job (bits 0-30). A worker
// enters only an open job by incrementing the count with a CAS, and the caller closes the job only when
// the count is 0, so no worker can still be reading a job's fields when the next job overwrites them.
constexpr uint64_t kOpen = uint64_t{1} << 31;
constexpr uint64_t job_word(uint32_t epoch, bool open) { return (uint64_t{epoch} << 32) | (open ? kOpen : 0); }
constexpr uint32_t epoch_of(uint64_t word) { return static_cast<uint32_t>(word >> 32); }
constexpr bool is_open(uint64_t word) { return (word & kOpen) != 0; }

class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }
  Pool() { start(available_cores()); }
  ~Pool() { stop(); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int threads() const { return threads_.load(std::memory_order_relaxed); }

  void resize(int threads) {
    std::lock_guard<std::mutex> lock(run_mutex_);
    stop();
    start(threads);
  }

  // Runs a region; returns how many of its tasks the calling thread ran.
  int64_t run(int64_t tasks, parallel_detail::TaskFn call, void* context) {
    if (t_in_region || threads() == 1) return run_inline(tasks, call, context);
    std::unique_lock<std::mutex> lock(run_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return run_inline(tasks, call, context);  // another thread's region is running
    RegionScope scope;
    publish(tasks, call, context);
    const int64_t mine = work(0);  // returns once every task is claimed
    close();                       // and this once every worker that claimed one has left the job
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return mine;
  }

 private:
  void start(int threads) {
    stopping_.store(false);
    threads_.store(threads, std::memory_order_relaxed);
    const uint32_t epoch = epoch_;
    shares_ = std::vector<Share>(threads);
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, epoch, i] { worker_loop(i, epoch); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      stopping_.store(true);
    }
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
    workers_.clear();
  }

  void publish(int64_t tasks, parallel_detail::TaskFn call, void* context) {
    call_ = call;
    context_ = context;
    fp_mode_ = fp_mode();
    const int n = threads();
    for (int p = 0; p < n; ++p) {
      shares_[p].next.store(tasks * p / n, std::memory_order_relaxed);
      shares_[p].end = tasks * (p + 1) / n;
    }
    failed_.store(false, std::memory_order_relaxed);
    state_.store(job_word(++epoch_, true), std::memory_order_seq_cst);
    // Paired with the sleeper's increment then re-check (both seq_cst): either it sees the job, or we see it.
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      wake_.notify_all();
    }
  }

  // Closes the job once no worker is inside it. A worker leaves only after the tasks it claimed have run (its
  // release pairs with this acquire), so when every task is claimed this is the region's end: no count of tasks
  // done is kept, whose cache line would move between the cores at every task (a third of the time of an empty
  // 25-task region on two threads).
  void close() {
    const uint64_t open = job_word(epoch_, true), closed = job_word(epoch_, false);
    poll_until(
        [&] {
          uint64_t expected = open;
          return state_.compare_exchange_weak(expected, closed, std::memory_order_acq_rel);
        },
        kSpinBeforeYield, [] { std::this_thread::yield(); });
  }

  // Claims tasks until none is left: first from thread `self`'s own share, then from the others' in turn. A
  // failed job's remaining tasks are claimed but not run. Returns how many it claimed.
  int64_t work(int self) {
    const int n = threads();
    int64_t claimed = 0;
    for (int i = 0; i < n; ++i) {
      Share& share = shares_[(self + i) % n];
      for (int64_t t; (t = share.next.fetch_add(1, std::memory_order_relaxed)) < share.end; ++claimed) run_task(t);
    }
    return claimed;
  }

  void run_task(int64_t t) {
    if (failed_.load(std::memory_order_relaxed)) return;
    try {
      call_(context_, t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }

  void worker_loop(int self, uint32_t seen) {
    t_in_region = true;
    for (;;) {
      uint64_t word = wait_for_job(seen);
      if (stopping_.load()) return;
      if (!state_.compare_exchange_weak(word, word + 1, std::memory_order_acquire, std::memory_order_relaxed))
        continue;  // the job closed or another worker entered first: look again
      seen = epoch_of(word);
      set_fp_mode(fp_mode_);
      work(self);
      state_.fetch_sub(1, std::memory_order_release);
    }
  }

  // Returns the job word once an open job other than `seen` is posted (or the pool is stopping).
  uint64_t wait_for_job(uint32_t seen) {
    uint64_t word = 0;
    auto ready = [&] {
      word = state_.load(std::memory_order_seq_cst);
      return stopping_.load(std::memory_order_relaxed) || (is_open(word) && epoch_of(word) != seen);
    };
    poll_until(ready, kSpinBeforeSleep, [&] {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, ready);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    });
    return word;
  }

  std::vector<std::thread> workers_;
  std::atomic<int> threads_{1};
  std::mutex run_mutex_;  // one region at a time; also held while the pool is resized

  // The current job, written by the caller only while the job is closed.
  parallel_detail::TaskFn call_ = nullptr;
  void* context_ = nullptr;
  unsigned fp_mode_ = 0;  // the caller's floating-point mode, which the workers take on for the job
  uint32_t epoch_ = 0;
  std::atomic<uint64_t> state_{0};
  // Thread p's share of a job: tasks [tasks * p / n, tasks * (p + 1) / n), claimed from `next` by p first,
  // then by any thread that has finished its own. One cache line each, so claims on different shares never
  // contend.
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::vector<Share> shares_;
  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;

  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int num_threads() { return Pool::instance().threads(); }

void set_num_threads(int threads) {
  EMBER_CHECK(threads >= 0 && threads <= kMaxThreads, ValueError, "set_num_threads(", threads,
              "): the thread count must be 1..", kMaxThreads, ", or 0 for every core this process may use (",
              available_cores(), ")");
  EMBER_CHECK(!t_in_region, ValueError,
              "set_num_threads() was called from inside a parallel region; set the thread count before running ops");
  Pool::instance().resize(threads == 0 ? available_cores() : threads);
}

void set_flush_denormals(bool on) { set_fp_mode(on ? kDenormalBits : 0); }
bool flush_denormals() { return kDenormalBits != 0 && fp_mode() == kDenormalBits; }

namespace parallel_detail {
void run_tasks(int64_t tasks, TaskFn call, void* context, const char* site, double work) {
  if (!region_profiling() || t_in_region) {
    Pool::instance().run(tasks, call, context);
    return;
  }
  const auto now = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const int64_t begin = now();
  int64_t mine = tasks;
  if (tasks == 1) call(context, 0);  // as parallel_for runs a single task unprofiled: on the caller, not as a region
  else mine = Pool::instance().run(tasks, call, context);
  record_region(site, work, tasks, begin, now(), mine);
}
}  // namespace parallel_detail

}  // namespace ember::kernels::cpu
