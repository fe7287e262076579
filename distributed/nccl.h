// NCCL all-reduce and broadcast of device buffers (CUDA builds with NCCL only). The communicator is
// bootstrapped by whoever owns the ranks: rank 0's unique id reaches the others through `share_id`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/stream.h"

namespace ember::dist {

struct NcclComm;  // holds the ncclComm_t

// Copies rank 0's `bytes` bytes at `data` to every other rank's `data` (an MPI broadcast, say).
using ShareBytes = std::function<void(void* data, size_t bytes)>;

// nullptr (with the reason in *why) when NCCL is not built in or cannot start on `device`.
std::unique_ptr<NcclComm, void (*)(NcclComm*)> nccl_start(int rank, int size, int device, const ShareBytes& share_id,
                                                          std::string* why);
// Queued on `stream`; the host does not wait.
void nccl_all_reduce_sum(NcclComm& comm, void* data, int64_t count, DType dtype, const cuda::Stream& stream);
void nccl_broadcast(NcclComm& comm, void* data, int64_t bytes, int root, const cuda::Stream& stream);
// "NCCL 2.x.y"
std::string nccl_version();

}  // namespace ember::dist
