// The `ember` command-line tool: subcommands over ember's library (CLI11).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "apps/commands.h"
#include "base/error.h"
#include "base/version.h"
#include "distributed/communicator.h"
#include "core/host.h"

int main(int argc, char** argv) {
  CLI::App app{"ember: a tensor engine with hand-written CUDA kernels"};
  app.require_subcommand(1);
  app.fallthrough();  // the options below may come after the subcommand too
  app.set_version_flag("--version", "ember " EMBER_VERSION);
  bool keep_denormals = false;
  app.add_flag("--keep-denormals", keep_denormals,
               "Compute with denormal floats on the CPU instead of flushing them to zero, ember's default (each "
               "operation on a denormal takes a microcode assist: SGD updates ran 3x slower once the momentum of "
               "dead units decayed into them)");
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
  ember::set_flush_denormals(!keep_denormals);  // before any thread starts: they inherit the mode
  int code = 0;
  const char* kind = "error";
  std::string message;
  try {
    ember::apps::run_selected(app);
    return 0;
  } catch (const ember::ValueError& e) {  // a bad value given on the command line
    code = 2, message = e.what();
  } catch (const ember::Error& e) {
    code = 1, message = e.what();
  } catch (const std::exception& e) {
    code = 1, kind = "unexpected error", message = e.what();
  }
  // One rank of a data-parallel run that fails alone would leave the others waiting in a collective:
  // it names itself and ends the whole run (mpirun reports the rank and the exit code).
  if (ember::dist::Communicator* world = ember::dist::multi_rank_world()) {
    std::fprintf(stderr, "ember: %s on rank %d of %d: %s\n", kind, world->rank(), world->size(), message.c_str());
    std::fflush(stderr);
    world->abort(code);
  }
  std::fprintf(stderr, "ember: %s: %s\n", kind, message.c_str());
  return code;
}
