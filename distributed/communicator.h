// dist: the processes of one data-parallel run and the collectives between them (docs/distributed.md).
// A Communicator is the whole world of ranks: one process without a launcher, or every rank that
// `mpirun -np N` started when ember is built with MPI (EMBER_MPI). Collectives are called by every rank in
// the same order, as in MPI; each leaves the same bits on every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::dist {

// A collective queued to run while the caller goes on (a gradient bucket during backward).
class Work {
 public:
  virtual ~Work() = default;
  // Returns once the result is in the tensor (on a GPU: once the device's compute stream is ordered after
  // it; the host does not wait). Rethrows the collective's error. Call it exactly once.
  virtual void wait() = 0;
  // Seconds the collective itself ran (valid after wait(); 0 where it is not measured).
  virtual double seconds() const { return 0; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's index and the number of ranks on its own machine (for picking cuda:local_rank).
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // "single process", "MPI (OpenMPI 4.1.4)", ... ; with `device` the path device tensors take.
  virtual std::string describe(Device device) const = 0;

  // Sums a contiguous f32/f64 tensor over all ranks, in place.
  virtual void all_reduce_sum(Tensor& t) = 0;
  // The same, queued behind earlier asynchronous collectives on a communication thread (or stream); `t`
  // must not be touched until wait() returns.
  virtual std::unique_ptr<Work> all_reduce_sum_async(Tensor t) = 0;
  // Copies root's `t` (any dtype, contiguous) into every other rank's `t`, in place.
  virtual void broadcast(Tensor& t, int root) = 0;
  // Sums host scalars over all ranks (metrics).
  virtual std::vector<double> all_reduce_sum(const std::vector<double>& values) = 0;
  // Every rank's value, in rank order.
  virtual std::vector<uint64_t> all_gather(uint64_t value) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the run (a rank that failed alone would leave the others waiting in a collective).
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// The world of this process: MPI's when a launcher (mpirun, srun) started it and ember has MPI, else a
// single process. Created on first use, finalised at exit. Throws ValueError when a launcher started more
// than one rank but this ember was built without MPI (exit 2 in the CLI).
Communicator& world();
// world() if it was created and spans more than one rank, else nullptr (for error paths that must not
// start MPI just to ask).
Communicator* multi_rank_world();
// Whether this ember was built with MPI, and with NCCL for device tensors.
bool built_with_mpi();
bool built_with_nccl();

// The world size a launcher announced in the environment (OpenMPI's OMPI_COMM_WORLD_SIZE, MPICH's PMI_SIZE;
// 0: none, a plain process). `getenv` is a parameter so tests can feed it.
using GetEnv = std::function<const char*(const char*)>;
int launcher_world_size(const GetEnv& getenv);

// A single process: every collective is the identity.
std::unique_ptr<Communicator> make_single_process();

}  // namespace ember::dist
