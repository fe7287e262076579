// The region profile: off by default; when on, one row per site, task count and work, with the calls, the tasks
// the calling thread ran, and the serial time between regions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/region_profile.h"
#include "support/threads.h"

namespace {

namespace cpu = ember::kernels::cpu;
using ember::test::ThreadsScope;

// Profiling for one test, off again afterwards whatever happens.
struct ProfilingScope {
  ProfilingScope() { cpu::set_region_profiling(true); }
  ~ProfilingScope() { cpu::set_region_profiling(false); }
};

const cpu::RegionStats* find(const cpu::RegionProfile& p, const std::string& site, int64_t tasks) {
  for (const auto& r : p.regions)
    if (r.site == site && r.tasks == tasks) return &r;
  return nullptr;
}

// A kernel-like function: its regions carry its name.
void named_kernel(int64_t n) {
  cpu::parallel_chunks(n, 4, [](int64_t, int64_t) {});
}

void pause_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

TEST_CASE("The region profile records nothing while it is off", "[kernels]") {
  { ProfilingScope on; }  // forgets what earlier tests recorded, then turns it off
  ThreadsScope threads(2);
  cpu::parallel_for(8, [](int64_t) {}, "unprofiled", 1.0);
  named_kernel(100);
  CHECK(cpu::region_profile().regions.empty());
}

TEST_CASE("The region profile counts each site's regions, tasks, caller's share and the time between", "[kernels]") {
  for (int threads : {1, 2}) {
    ThreadsScope scope(threads);
    ProfilingScope on;
    INFO("threads " << threads);
    for (int i = 0; i < 3; ++i) cpu::parallel_for(6, [](int64_t) {}, "six", 42.0);
    cpu::parallel_for(6, [](int64_t) {}, "six", 7.0);  // other work: its own row
    pause_for(std::chrono::microseconds(2000));       // serial time, after "six" (7.0)
    named_kernel(10);                                  // 3 chunks of 4
    named_kernel(3);                                   // 1 chunk: a single task, recorded when profiling
    // A region opened inside a task is part of its parent.
    cpu::parallel_for(2, [](int64_t) { cpu::parallel_for(5, [](int64_t) {}, "nested"); }, "outer");

    const cpu::RegionProfile p = cpu::region_profile();
    const cpu::RegionStats* six = find(p, "six", 6);
    REQUIRE(six != nullptr);
    CHECK(six->calls == 3);
    CHECK(six->work == 42.0);
    CHECK(six->caller_tasks >= 0);
    CHECK(six->caller_tasks <= 18);
    if (threads == 1) CHECK(six->caller_tasks == 18);
    const auto other = std::find_if(p.regions.begin(), p.regions.end(),
                                    [](const cpu::RegionStats& r) { return r.site == "six" && r.work == 7.0; });
    REQUIRE(other != p.regions.end());
    CHECK(other->calls == 1);
    CHECK(other->seconds_after >= 0.002);
    const cpu::RegionStats* chunks = find(p, "named_kernel", 3);
    REQUIRE(chunks != nullptr);
    CHECK(chunks->calls == 1);
    const cpu::RegionStats* single = find(p, "named_kernel", 1);
    REQUIRE(single != nullptr);
    CHECK(single->caller_tasks == 1);
    CHECK(find(p, "outer", 2) != nullptr);
    CHECK(find(p, "nested", 5) == nullptr);

    double inside = 0, after = 0;
    for (const auto& r : p.regions) inside += r.seconds, after += r.seconds_after;
    CHECK(p.seconds == Approx(inside + after).epsilon(1e-6));
    CHECK(std::is_sorted(p.regions.begin(), p.regions.end(),
                         [](const cpu::RegionStats& a, const cpu::RegionStats& b) { return a.seconds > b.seconds; }));
  }
}
