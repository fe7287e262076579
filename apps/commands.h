// ember's subcommands: each add_*_command registers its options and an action on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace ember::apps {

void add_info_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_bench_command(CLI::App& app);

// Actions run after parsing (not inside CLI11's callbacks), so main() maps ember's errors to exit
// codes in one place.
void register_action(const CLI::App* subcommand, std::function<void()> action);
void run_selected(CLI::App& app);


}  // namespace ember::apps

#include "core/device.h"

namespace ember::apps {
// --device auto|cpu|cuda|cuda:N: auto is Device::best(); the rest as Device::parse (ValueError).
Device resolve_device(const std::string& text);
}  // namespace ember::apps
