// Runs the built `ember` binary (EMBER_BINARY) with arguments, or any command line, and captures its exit code
// and output.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "data/dataset.h"

namespace ember::test {

struct EmberRun {
  int code;            // exit status, or 128 + signal
  std::string output;  // stdout and stderr together
};

// Runs a shell command line (sh -c), stderr joined to stdout.
inline EmberRun run_command(const std::string& command) {
  std::string cmd = command + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed for: " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

inline EmberRun run_ember(const std::string& args) { return run_command(std::string(EMBER_BINARY) + " " + args); }

// Whether Debian's dataset-fashion-mnist (or $EMBER_FASHION_MNIST_DIR) is there for a training run.
inline bool have_dataset() {
  return std::filesystem::exists(std::filesystem::path(data::default_fashion_mnist_dir()) /
                                 "train-images-idx3-ubyte.gz");
}

// An empty directory under the temporary directory, unique to `name` and this process.
inline std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path d = std::filesystem::temp_directory_path() / ("ember-test-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// A file's bytes (empty when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace ember::test
