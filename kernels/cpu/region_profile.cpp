// The region profile's recorder: a map from (site, tasks, work) to sums, behind a mutex (profiling is a
// diagnostic mode; with it off, nothing here runs).
#include "kernels/cpu/region_profile.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

namespace ember::kernels::cpu {
namespace {

using Key = std::tuple<std::string, int64_t, double>;

struct Recorder {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::map<Key, RegionStats> regions;
  int64_t first_ns = 0, last_end_ns = 0;
  RegionStats* previous = nullptr;  // the last region recorded, which the time until the next one is added to
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

}  // namespace

void set_region_profiling(bool on) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (on) {
    r.regions.clear();
    r.first_ns = r.last_end_ns = 0;
    r.previous = nullptr;
  }
  r.on.store(on, std::memory_order_relaxed);
}

RegionProfile region_profile() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  RegionProfile p;
  p.seconds = double(r.last_end_ns - r.first_ns) * 1e-9;
  for (const auto& [key, stats] : r.regions) p.regions.push_back(stats);
  std::stable_sort(p.regions.begin(), p.regions.end(),
                   [](const RegionStats& a, const RegionStats& b) { return a.seconds > b.seconds; });
  return p;
}

namespace parallel_detail {

bool region_profiling() { return recorder().on.load(std::memory_order_relaxed); }

void record_region(const char* site, double work, int64_t tasks, int64_t begin_ns, int64_t end_ns,
                   int64_t caller_tasks) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.on.load(std::memory_order_relaxed)) return;
  if (r.previous != nullptr) r.previous->seconds_after += double(begin_ns - r.last_end_ns) * 1e-9;
  else r.first_ns = begin_ns;
  RegionStats& s = r.regions[Key{site, tasks, work}];  // one row per name, from any call site
  if (s.calls == 0) s = RegionStats{site, tasks, work};
  s.calls += 1;
  s.seconds += double(end_ns - begin_ns) * 1e-9;
  s.caller_tasks += caller_tasks;
  r.last_end_ns = end_ns;
  r.previous = &s;
}

}  // namespace parallel_detail

}  // namespace ember::kernels::cpu
