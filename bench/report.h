// The three outputs of a benchmark report: an aligned terminal table, JSON with every figure, and
// SVG plots (bandwidth vs size, GFLOP/s vs size, crossover).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/suites.h"

namespace ember::bench {

// The whole report as aligned text tables, one per suite section, then the crossover and failures.
std::string format_report(const Report& report);

// Every row with its statistics and derived rates; unmeasured rows have "stats": null, null rates
// and a "reason" string (e.g. "no CUDA device").
nlohmann::ordered_json report_json(const Report& report);

// Writes <dir>/<suite>.svg for each suite that ran (creating dir); returns the paths written.
std::vector<std::string> write_svgs(const Report& report, const std::string& dir);

}  // namespace ember::bench
