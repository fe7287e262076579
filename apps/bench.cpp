// `ember bench`: host-vs-device micro-benchmarks (transfers, gemm, ops, step, conv, attention, cores, crossover) as a
// table, JSON and SVG plots.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "apps/commands.h"
#include "bench/report.h"
#include "bench/suites.h"
#include "base/error.h"
#include "formats/file.h"
#include "formats/svg.h"

namespace ember::apps {

void add_bench_command(CLI::App& app) {
  auto* sub = app.add_subcommand("bench", "Host-vs-device micro-benchmarks with a measured crossover");
  sub->option_defaults()->always_capture_default();
  auto suite = std::make_shared<std::string>("all");
  auto quick = std::make_shared<bool>(false);
  auto json_path = std::make_shared<std::string>();
  auto svg_dir = std::make_shared<std::string>();
  auto threads = std::make_shared<int>(0);
  auto flush_l2 = std::make_shared<bool>(false);

  sub->add_option("--suite", *suite, "Which suite to run (crossover also runs ops and step)")
      ->check(CLI::IsMember({"transfers", "gemm", "ops", "step", "conv", "attention", "cores", "crossover", "all"}));
  sub->add_flag("--quick", *quick, "Smaller sizes and time budgets (well under a minute on a GPU machine)");
  sub->add_option("--json", *json_path, "Write every figure as JSON to this file");
  sub->add_option("--svg", *svg_dir, "Write SVG plots (one per suite) into this directory");
  sub->add_option("--threads", *threads, "Host threads for the CPU kernels (0: every core)")
      ->check(CLI::Range(0, 1024));
  sub->add_flag("--flush-l2", *flush_l2, "Overwrite the GPU's L2 cache before each timed device repetition");

  register_action(sub, [=] {
    bench::BenchConfig config;
    config.suites = {*suite};
    config.quick = *quick;
    config.threads = *threads;
    config.flush_l2 = *flush_l2;
    config.command = "ember bench --suite " + *suite + (*quick ? " --quick" : "") +
                     (*threads > 0 ? " --threads " + std::to_string(*threads) : "") + (*flush_l2 ? " --flush-l2" : "");
    bench::Report report = bench::run_benchmarks(config, isatty(STDERR_FILENO) ? stderr : nullptr);
    std::cout << bench::format_report(report) << std::flush;
    if (!json_path->empty()) {
      std::filesystem::path parent = std::filesystem::path(*json_path).parent_path();
      std::error_code ec;
      if (!parent.empty()) std::filesystem::create_directories(parent, ec);  // a failure shows in the write
      formats::write_text_file(*json_path, bench::report_json(report).dump(2) + "\n");
      std::cout << "\nJSON: " << *json_path << '\n';
    }
    if (!svg_dir->empty())
      for (const std::string& path : bench::write_svgs(report, *svg_dir)) std::cout << "SVG:  " << path << '\n';
    EMBER_CHECK(report.failures.empty(), Error, report.failures.size(),
                " benchmark row(s) failed verification against the CPU twin (listed above); their timings were "
                "not taken");
  });
}

}  // namespace ember::apps
