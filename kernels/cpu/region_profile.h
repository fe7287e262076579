// Opt-in timing of the host pool's regions: where a training step's time goes, region by region, how evenly
// the threads shared each region's tasks, and how much time the calling thread spent alone between regions.
// `ember train --profile-regions` prints it (docs/benchmarks.md reads two threads against one with it).
//
// A region is one parallel_for (or parallel_chunks) call; its site is the function that opened it, named by
// __builtin_FUNCTION() unless the site passes a name. With profiling on, single-task regions are recorded too:
// they run on the calling thread alone. Regions opened inside a region are part of it and are not recorded.
// Meant for one calling thread (ember train's): "after" is the time from the end of a region to the start of the
// next one, i.e. the serial work in between.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::kernels::cpu {

// The regions one site opened with one task count and one amount of work.
struct RegionStats {
  std::string site;
  int64_t tasks = 0;          // tasks a region (1: it ran on the calling thread alone)
  double work = 0;            // what one region computes, as its site counts it (gemm_group: FLOPs); 0: not given
  int64_t calls = 0;          // regions
  double seconds = 0;         // inside them, on the calling thread's clock
  double seconds_after = 0;   // from the end of each to the start of the next recorded region
  int64_t caller_tasks = 0;   // of their calls * tasks tasks, those the calling thread ran itself
};

struct RegionProfile {
  double seconds = 0;                // from the start of the first recorded region to the end of the last
  std::vector<RegionStats> regions;  // most seconds first
};

// Starts recording, forgetting what was recorded before (on), or stops (off). Off by default; while off, a
// region costs one relaxed atomic load more.
void set_region_profiling(bool on);
// What was recorded since profiling was last turned on.
RegionProfile region_profile();

namespace parallel_detail {
bool region_profiling();
// One region opened outside any region: its site, work, task count, clock span (steady_clock nanoseconds) and
// the tasks the calling thread ran.
void record_region(const char* site, double work, int64_t tasks, int64_t begin_ns, int64_t end_ns,
                   int64_t caller_tasks);
}  // namespace parallel_detail

}  // namespace ember::kernels::cpu
