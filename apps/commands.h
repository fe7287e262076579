// Registration of ember's subcommands; each adds itself to the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace ember::apps {

void add_info_command(CLI::App& app);
void add_demo_command(CLI::App& app);
// Runs the callback of the subcommand CLI11 parsed (callbacks are stored, not run in parse, so
// that ember's errors are reported by main with the right exit code).
void run_selected(CLI::App& app);

}  // namespace ember::apps
