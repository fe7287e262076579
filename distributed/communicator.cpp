// The single-process communicator, the launcher's environment and the choice of world().
#include "distributed/communicator.h"

#include <cstdlib>
#include <string>

#include "base/error.h"
#include "distributed/mpi.h"

namespace ember::dist {

namespace {

class Done : public Work {
 public:
  void wait() override {}
};

class SingleProcess : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string describe(Device) const override { return "single process"; }
  void all_reduce_sum(Tensor&) override {}
  std::unique_ptr<Work> all_reduce_sum_async(Tensor) override { return std::make_unique<Done>(); }
  void broadcast(Tensor&, int) override {}
  std::vector<double> all_reduce_sum(const std::vector<double>& values) override { return values; }
  std::vector<uint64_t> all_gather(uint64_t value) override { return {value}; }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

}  // namespace

std::unique_ptr<Communicator> make_single_process() { return std::make_unique<SingleProcess>(); }

int launcher_world_size(const GetEnv& getenv) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    long n = std::strtol(value, &end, 10);
    EMBER_CHECK(*end == '\0' && n >= 1 && n <= (1 << 24), ValueError, "the launcher set ", name, "='", value,
                "', which is not a number of ranks");
    return static_cast<int>(n);
  }
  return 0;
}

bool built_with_mpi() { return EMBER_HAS_MPI != 0; }
bool built_with_nccl() { return EMBER_HAS_NCCL != 0; }

namespace {
Communicator* g_world = nullptr;
}  // namespace

Communicator* multi_rank_world() { return g_world != nullptr && g_world->size() > 1 ? g_world : nullptr; }

Communicator& world() {
  static std::unique_ptr<Communicator> comm = [] {
    const int launched = launcher_world_size([](const char* name) -> const char* { return std::getenv(name); });
#if EMBER_HAS_MPI
    if (launched > 0) return make_mpi_world();
#else
    EMBER_CHECK(launched <= 1, ValueError, "this ember was built without MPI, so it cannot train as one of the ",
                launched, " ranks mpirun started; install libopenmpi-dev and rebuild (EMBER_MPI), or run without mpirun");
#endif
    return make_single_process();
  }();
  g_world = comm.get();
  return *comm;
}

}  // namespace ember::dist
