// Main of the CUDA tests: exits 77 (CTest: Skipped) when no GPU is usable, unless
// EMBER_REQUIRE_CUDA=1 (the GPU check), which turns a missing GPU into a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/device.h"

int main(int argc, char** argv) {
  if (!ember::cuda::is_available()) {
    const char* require = std::getenv("EMBER_REQUIRE_CUDA");
    bool required = require != nullptr && std::strcmp(require, "1") == 0;
    std::printf("%s: CUDA tests not run: %s\n", required ? "FAILED" : "SKIPPED",
                ember::cuda::unavailable_reason().c_str());
    return required ? 1 : 77;
  }
  return Catch::Session().run(argc, argv);
}
