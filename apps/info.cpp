// `ember info`: the version, every device ember can use (or why CUDA is not usable), host cores and BLAS.
#include <cstdio>
#include <thread>

#include "apps/commands.h"
#include "base/version.h"
#include "core/device.h"
#include "distributed/communicator.h"
#include "core/host.h"

namespace ember::apps {

namespace {

void print_info() {
  std::printf("ember %s\n", EMBER_VERSION);
  std::printf("host: %u hardware threads, %d kernel threads (--threads)\n", std::thread::hardware_concurrency(),
              num_threads());
  std::printf("BLAS: OpenBLAS (%s), one thread inside each GEMM tile\n", blas_config().c_str());
  std::printf("host kernels: %s build of BatchNorm, pooling, LayerNorm and attention; convolutions on %s\n",
              host_kernels_isa(),
              host_kernels_avx512() ? "ember's own products (64+ deep, float) and OpenBLAS" : "OpenBLAS");
  int n = cuda::device_count();
  if (n == 0) {
    std::printf("cuda: %s\n", cuda::unavailable_reason().c_str());
  } else {
    for (int i = 0; i < n; ++i) {
      cuda::DeviceProperties p = cuda::properties(i);
      std::printf("cuda:%d: %s, %.1f GiB (%.1f GiB free), %d SMs, compute capability %d.%d, driver %d, runtime %d\n",
                  i, p.name.c_str(), p.total_memory / 1073741824.0, p.free_memory / 1073741824.0, p.multiprocessors,
                  p.major, p.minor, p.driver_version, p.runtime_version);
    }
  }
  std::printf("best device: %s\n", Device::best().str().c_str());
  std::printf("data-parallel: %s\n", !dist::built_with_mpi() ? "no (built without MPI: install libopenmpi-dev and rebuild)"
                                      : dist::built_with_nccl() ? "mpirun -np N ember train (MPI; NCCL for GPU tensors)"
                                                                : "mpirun -np N ember train (MPI; GPU tensors staged through host memory)");
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* sub = app.add_subcommand("info", "Show the devices ember can use, host cores and BLAS");
  register_action(sub, print_info);
}

}  // namespace ember::apps
