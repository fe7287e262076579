// NCCL collectives for device tensors. Compiled in every CUDA build that has NCCL (EMBER_HAS_NCCL); elsewhere
// nccl_start says why not and the MPI world stages device tensors through host memory instead.
#include "distributed/nccl.h"

#include "base/error.h"

#if EMBER_HAS_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace ember::dist {

#if EMBER_HAS_NCCL

struct NcclComm {
  ncclComm_t comm = nullptr;
};

namespace {

void nccl_check(ncclResult_t r, const char* what) {
  EMBER_CHECK(r == ncclSuccess, CudaError, what, " failed: ", ncclGetErrorString(r), " (NCCL_DEBUG=INFO says more)");
}

void destroy(NcclComm* c) {
  if (c != nullptr && c->comm != nullptr) ncclCommDestroy(c->comm);
  delete c;
}

ncclDataType_t nccl_type(DType dtype) {
  EMBER_CHECK(dtype == DType::F32 || dtype == DType::F64, DTypeError, "NCCL all-reduce takes f32 or f64, got ",
              dtype_name(dtype));
  return dtype == DType::F32 ? ncclFloat32 : ncclFloat64;
}

}  // namespace

std::unique_ptr<NcclComm, void (*)(NcclComm*)> nccl_start(int rank, int size, int device, const ShareBytes& share_id,
                                                          std::string* why) {
  ncclUniqueId id{};
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
    // Every rank must still take part in the broadcast; a zero id tells the others to give up too.
    id = ncclUniqueId{};
  }
  share_id(&id, sizeof id);
  bool any = false;
  for (char b : id.internal) any |= b != 0;
  std::unique_ptr<NcclComm, void (*)(NcclComm*)> out(new NcclComm{}, destroy);
  if (!any || cudaSetDevice(device) != cudaSuccess) {
    *why = "NCCL could not start (no unique id or no device)";
    return {nullptr, destroy};
  }
  const ncclResult_t r = ncclCommInitRank(&out->comm, size, id, rank);
  if (r != ncclSuccess) {
    *why = std::string("ncclCommInitRank failed: ") + ncclGetErrorString(r);
    return {nullptr, destroy};
  }
  return out;
}

void nccl_all_reduce_sum(NcclComm& c, void* data, int64_t count, DType dtype, const cuda::Stream& stream) {
  nccl_check(ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype), ncclSum, c.comm,
                           reinterpret_cast<cudaStream_t>(stream.handle())),
             "ncclAllReduce");
}

void nccl_broadcast(NcclComm& c, void* data, int64_t bytes, int root, const cuda::Stream& stream) {
  nccl_check(ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclUint8, root, c.comm,
                           reinterpret_cast<cudaStream_t>(stream.handle())),
             "ncclBroadcast");
}

std::string nccl_version() {
  int v = 0;
  ncclGetVersion(&v);
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

#else

struct NcclComm {};

std::unique_ptr<NcclComm, void (*)(NcclComm*)> nccl_start(int, int, int, const ShareBytes&, std::string* why) {
  *why = EMBER_HAS_CUDA ? "this CUDA build has no NCCL" : "this build has no CUDA";
  return {nullptr, [](NcclComm* c) { delete c; }};
}
void nccl_all_reduce_sum(NcclComm&, void*, int64_t, DType, const cuda::Stream&) {
  throw InternalError("nccl_all_reduce_sum without NCCL");
}
void nccl_broadcast(NcclComm&, void*, int64_t, int, const cuda::Stream&) { throw InternalError("nccl_broadcast without NCCL"); }
std::string nccl_version() { return "no NCCL"; }

#endif

}  // namespace ember::dist
