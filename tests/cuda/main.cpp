// Main of the CUDA tests: exits 77 (CTest: Skipped) when no GPU is usable, unless
// EMBER_REQUIRE_CUDA=1 (the GPU check), which turns a missing GPU into a failure. Catch2 runs with the
// strict warnings of support/strict_session.h.
#define CATCH_CONFIG_RUNNER
#include "support/strict_session.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "core/device.h"
#include "core/storage.h"
#include "kernels/linear.h"

int main(int argc, char** argv) {
  if (!ember::cuda::is_available()) {
    const char* require = std::getenv("EMBER_REQUIRE_CUDA");
    bool required = require != nullptr && std::strcmp(require, "1") == 0;
    std::printf("%s: CUDA tests not run: %s\n", required ? "FAILED" : "SKIPPED",
                ember::cuda::unavailable_reason().c_str());
    return required ? 1 : 77;
  }
  int failed = ember::test::run_strict_session(argc, argv);
  // Give every cached device allocation and the cuBLAS handles back, so compute-sanitizer's leak
  // check reports only real leaks.
  // After a device fault (a failed test) every call returns the sticky error: report it, never abort.
  try {
    ember::kernels::cuda::release_cublas_handles();
    for (int d = 0; d < ember::cuda::device_count(); ++d) {
      ember::cuda::synchronize(ember::Device::cuda(d));
      ember::cuda::empty_cache(d);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "CUDA tests: the device could not be cleaned up after the tests: %s\n", e.what());
    return failed != 0 ? failed : 1;
  }
  return failed;
}
