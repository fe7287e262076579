// The MPI world (built with EMBER_MPI only): every rank mpirun started, host collectives over MPI, device
// collectives over NCCL where it is built and starts, else staged through pinned host buffers and MPI.
#pragma once

#include <memory>

#include "distributed/communicator.h"

namespace ember::dist {

#if EMBER_HAS_MPI
// MPI_Init_thread (asking for MPI_THREAD_MULTIPLE); MPI_Finalize when the communicator is destroyed.
std::unique_ptr<Communicator> make_mpi_world();
#endif

}  // namespace ember::dist
