// The host thread pool: every task once, on several threads, errors rethrown, nesting and concurrent callers.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <limits>
#include <cstdint>
#include <set>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/parallel.h"
#include "support/threads.h"

namespace {

namespace cpu = ember::kernels::cpu;
using ember::test::ThreadsScope;

// Runs `tasks` tasks and returns how often each ran.
std::vector<int> run_counts(int64_t tasks) {
  std::vector<std::atomic<int>> counts(static_cast<size_t>(tasks));
  cpu::parallel_for(tasks, [&](int64_t t) { counts[static_cast<size_t>(t)].fetch_add(1); });
  std::vector<int> out;
  for (auto& c : counts) out.push_back(c.load());
  return out;
}

}  // namespace

TEST_CASE("parallel_for runs every task exactly once at any thread count", "[kernels]") {
  for (int threads : {1, 2, 3, 4}) {
    ThreadsScope scope(threads);
    REQUIRE(cpu::num_threads() == threads);
    for (int64_t tasks : {0, 1, 2, 3, 7, 64, 1000}) {
      INFO("threads " << threads << ", tasks " << tasks);
      CHECK(run_counts(tasks) == std::vector<int>(static_cast<size_t>(tasks), 1));
    }
  }
}

TEST_CASE("parallel_for with two threads runs two tasks at the same time", "[kernels]") {
  ThreadsScope scope(2);
  // Each task waits until both have started: that happens only if two threads run them concurrently.
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> started{0};
    std::atomic<bool> met{true};
    cpu::parallel_for(2, [&](int64_t) {
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (started.load() < 2)
        if (std::chrono::steady_clock::now() > deadline) {
          met = false;
          return;
        }
    });
    REQUIRE(met.load());
  }
}

TEST_CASE("parallel_for returns only after every task has returned", "[kernels]") {
  // The worker's task outlasts the caller's: a region that counts a task done when it is claimed, not when it has
  // run, lets the caller return while the worker is still inside it.
  ThreadsScope scope(2);
  for (int round = 0; round < 10; ++round) {
    std::vector<std::atomic<int>> done(2);
    cpu::parallel_for(2, [&](int64_t t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(t == 0 ? 1 : 15));
      done[static_cast<size_t>(t)].store(1);
    });
    INFO("round " << round);
    REQUIRE(done[0].load() == 1);
    REQUIRE(done[1].load() == 1);
  }
}

TEST_CASE("parallel_chunks cuts 0 .. n by the grain alone", "[kernels]") {
  for (int threads : {1, 2, 3}) {
    ThreadsScope scope(threads);
    for (int64_t n : {0, 1, 15, 16, 17, 1000}) {
      std::mutex mutex;
      std::set<std::pair<int64_t, int64_t>> chunks;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      cpu::parallel_chunks(n, 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard<std::mutex> lock(mutex);
        chunks.emplace(begin, end);
      });
      INFO("threads " << threads << ", n " << n);
      CHECK(static_cast<int64_t>(chunks.size()) == cpu::chunk_count(n, 16));
      for (auto [begin, end] : chunks) CHECK((begin % 16 == 0 && (end - begin == 16 || end == n)));
      for (auto& h : hits) CHECK(h.load() == 1);
    }
  }
}

TEST_CASE("A task's exception is rethrown by parallel_for and the pool keeps working", "[kernels]") {
  for (int threads : {1, 2}) {
    ThreadsScope scope(threads);
    INFO("threads " << threads);
    auto failing = [](int64_t t) {
      if (t == 17) throw ember::ValueError("task 17 failed");
    };
    CHECK_THROWS_AS(cpu::parallel_for(50, failing), ember::ValueError);
    CHECK_THROWS_WITH(cpu::parallel_for(50, failing), "task 17 failed");
    CHECK(run_counts(100) == std::vector<int>(100, 1));
  }
}

TEST_CASE("A region opened inside a task runs inline and completes", "[kernels]") {
  ThreadsScope scope(2);
  std::atomic<int> inner{0};
  cpu::parallel_for(4, [&](int64_t) { cpu::parallel_for(5, [&](int64_t) { inner.fetch_add(1); }); });
  CHECK(inner.load() == 20);
}

TEST_CASE("Regions from two threads at once both complete", "[kernels]") {
  ThreadsScope scope(2);
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int r = 0; r < 200; ++r) cpu::parallel_for(8, [&](int64_t t) { total.fetch_add(t + 1); });
  };
  std::thread other(caller);
  caller();
  other.join();
  CHECK(total.load() == 2 * 200 * 36);
}

TEST_CASE("set_num_threads rejects bad counts, and calls from inside a task", "[kernels]") {
  ThreadsScope scope(2);
  CHECK_THROWS_AS(cpu::set_num_threads(-1), ember::ValueError);
  CHECK_THROWS_WITH(cpu::set_num_threads(-1), Catch::Contains("the thread count must be 1..256, or 0"));
  CHECK_THROWS_AS(cpu::set_num_threads(cpu::kMaxThreads + 1), ember::ValueError);
  CHECK(cpu::num_threads() == 2);
  for (int threads : {1, 2}) {
    cpu::set_num_threads(threads);
    auto resize = [](int64_t) { cpu::set_num_threads(1); };
    CHECK_THROWS_AS(cpu::parallel_for(3, resize), ember::ValueError);
    CHECK_THROWS_WITH(cpu::parallel_for(3, resize), Catch::Contains("from inside a parallel region"));
  }
  cpu::set_num_threads(0);
  CHECK(cpu::num_threads() == cpu::available_cores());
}

#if defined(__x86_64__) || defined(__i386__)
TEST_CASE("Every task runs in its caller's denormal mode, whichever thread runs it", "[kernels]") {
  ThreadsScope scope(2);
  cpu::parallel_for(2, [](int64_t) {});  // the workers exist before the mode changes
  for (bool flush : {true, false, true}) {
    cpu::set_flush_denormals(flush);
    CHECK(cpu::flush_denormals() == flush);
    for (int round = 0; round < 20; ++round) {
      // Both tasks wait for each other, so one runs on a worker; each halves the smallest normal float.
      std::atomic<int> started{0};
      std::atomic<int> flushed{0};
      cpu::parallel_for(2, [&](int64_t) {
        started.fetch_add(1);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) {
        }
        volatile float smallest = std::numeric_limits<float>::min();
        const float half = smallest * 0.5f;  // a denormal, or 0 when flushed
        if (half == 0.0f) flushed.fetch_add(1);
      });
      REQUIRE(started.load() == 2);
      CHECK(flushed.load() == (flush ? 2 : 0));
    }
  }
  cpu::set_flush_denormals(false);
}
#endif

TEST_CASE("With two threads each starts on its own half of a region's tasks", "[kernels]") {
  ThreadsScope scope(2);
  for (int round = 0; round < 20; ++round) {
    // Task 0 (the caller's first) holds the caller until the worker has run a task, so the worker's first task
    // is the first of its own share, 4 of 0..7, not the next one in line (1).
    std::mutex mutex;
    std::vector<int64_t> worker_order;
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> worker_ran{0};
    cpu::parallel_for(8, [&](int64_t task) {
      if (std::this_thread::get_id() != caller) {
        std::lock_guard<std::mutex> lock(mutex);
        worker_order.push_back(task);
        worker_ran.fetch_add(1);
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (task == 0 && worker_ran.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      }
    });
    REQUIRE(!worker_order.empty());
    CHECK(worker_order.front() == 4);
  }
}
