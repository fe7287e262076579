// The `ember` command-line tool: subcommands over ember's library (CLI11).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "apps/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"ember: a tensor engine with hand-written CUDA kernels"};
  app.require_subcommand(1);
  ember::apps::add_info_command(app);
  ember::apps::add_demo_command(app);
  ember::apps::add_train_command(app);
  ember::apps::add_eval_command(app);
  ember::apps::add_predict_command(app);
  ember::apps::add_bench_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // usage errors exit 2
  }
  try {
    ember::apps::run_selected(app);
  } catch (const ember::ValueError& e) {  // a bad value given on the command line
    std::fprintf(stderr, "ember: error: %s\n", e.what());
    return 2;
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "ember: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}
