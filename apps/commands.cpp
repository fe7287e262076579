// The subcommand action registry.
#include "apps/commands.h"

#include <map>

namespace ember::apps {

namespace {
std::map<const CLI::App*, std::function<void()>>& actions() {
  static std::map<const CLI::App*, std::function<void()>> a;
  return a;
}
}  // namespace

void register_action(const CLI::App* subcommand, std::function<void()> action) {
  actions()[subcommand] = std::move(action);
}

void run_selected(CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    auto it = actions().find(sub);
    if (it != actions().end()) it->second();
  }
}

}  // namespace ember::apps

namespace ember::apps {

Device resolve_device(const std::string& text) { return text == "auto" ? Device::best() : Device::parse(text); }

}  // namespace ember::apps
