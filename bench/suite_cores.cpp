// cores: how far apart this process's cores are: the round trip of one cache line between the first core it may
// run on and each other one, handed back and forth by two threads pinned there. On a VM the host places the virtual
// cores, and the same 2-core machine has run with them 80 ns apart (sharing a last-level cache) and 360 ns apart
// (not), its two-thread training 1.4x slower in the second placement (docs/benchmarks.md, "Where the two cores
// sit"). scripts/compare-torch runs this around each training run to say which placement a figure had.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "bench/suites.h"

namespace ember::bench {

namespace {

constexpr size_t kMaxPairs = 7;  // the first core against at most this many others

std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  return cores;
}

// Spins until ready(); yields now and then, so that two threads given one core (a busy machine) still get through.
template <typename Ready> void wait_for(Ready ready) {
  for (int spins = 1; !ready(); ++spins)
    if (spins % 4096 == 0) std::this_thread::yield();
}

bool pin_to(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Mean round trips between cores a and b, one sample per burst of `trips`: a writes an odd number into one shared
// cache line, b answers with the next even one, a waits for it. Empty when either thread could not be pinned.
std::vector<double> round_trips(int a, int b, int bursts, int64_t trips) {
  struct alignas(64) Line {
    std::atomic<int64_t> value{0};
    std::atomic<int> arrived{0};
    std::atomic<bool> unpinned{false};  // a thread could not be pinned
  } line;
  const int64_t total = int64_t(bursts) * trips;
  auto arrive = [&](int core) {  // both threads pinned, or false for both
    if (!pin_to(core)) line.unpinned.store(true);
    line.arrived.fetch_add(1);
    wait_for([&] { return line.arrived.load() == 2; });
    return !line.unpinned.load();
  };
  std::thread partner([&] {
    if (!arrive(b)) return;
    for (int64_t i = 0; i < total; ++i) {
      wait_for([&] { return line.value.load(std::memory_order_acquire) == 2 * i + 1; });
      line.value.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::vector<double> samples;
  std::thread caller([&] {
    if (!arrive(a)) return;
    for (int64_t k = 0, i = 0; k < bursts; ++k) {
      const auto start = std::chrono::steady_clock::now();
      for (int64_t end = i + trips; i < end; ++i) {
        line.value.store(2 * i + 1, std::memory_order_release);
        wait_for([&] { return line.value.load(std::memory_order_acquire) == 2 * i + 2; });
      }
      samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                        double(trips));
    }
  });
  caller.join();
  partner.join();
  return samples;
}

}  // namespace

void run_cores(BenchContext& ctx) {
  Row row;
  row.suite = "cores";
  row.table = "round trip of a cache line between two cores (pinned threads)";
  row.name = "round_trip";
  row.column = "cpu";
  row.device = "cpu";
  row.timer = "steady_clock";
  const std::vector<int> cores = allowed_cores();
  if (cores.size() < 2) {
    row.label = cores.empty() ? "cores" : "core " + std::to_string(cores[0]);
    ctx.add(unmeasured(row, "this process may run on one core only: there is no pair to measure"));
    return;
  }
  const int bursts = ctx.quick ? 21 : 41;
  const int64_t trips = ctx.quick ? 2000 : 20000;
  for (size_t i = 1; i < cores.size() && i <= kMaxPairs; ++i) {
    Row r = row;
    r.label = "core " + std::to_string(cores[0]) + " <-> core " + std::to_string(cores[i]);
    r.params = {{"core_a", cores[0]}, {"core_b", cores[i]}};
    r.size = double(i);
    ctx.progress("cores: " + r.label);
    std::vector<double> samples = round_trips(cores[0], cores[i], bursts, trips);
    ctx.add(samples.empty() ? unmeasured(r, "a thread could not be pinned to its core (sched_setaffinity refused)")
                            : measured(r, std::move(samples)));
  }
}

}  // namespace ember::bench
