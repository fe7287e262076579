// transfer(): the only place ember moves bytes between memories; every copy lands in the ledger.
#include "core/transfer.h"

#include <chrono>
#include <cstring>

#include "core/cuda_runtime.h"
#include "base/error.h"
#include "core/transfer_ledger.h"

namespace ember {

void transfer(MemoryRef dst, MemoryRef src, size_t bytes, bool non_blocking, const char* tag,
              const cuda::Stream* stream) {
  EMBER_CHECK(!dst.device.is_meta() && !src.device.is_meta(), ValueError,
              "cannot copy data to or from a meta tensor: it has a shape but no storage (", tag, ")");
  if (bytes == 0) return;
  if (dst.device.is_cpu() && src.device.is_cpu()) {
    std::memcpy(dst.data, src.data, bytes);
    return;
  }
  using cuda::runtime::CopyKind;
  TransferDirection dir;
  CopyKind kind;
  bool pinned = false;
  int device;
  if (src.device.is_cpu()) {
    dir = TransferDirection::HostToDevice, kind = CopyKind::HostToDevice, pinned = src.pinned, device = dst.device.index;
  } else if (dst.device.is_cpu()) {
    dir = TransferDirection::DeviceToHost, kind = CopyKind::DeviceToHost, pinned = dst.pinned, device = src.device.index;
  } else {
    dir = TransferDirection::DeviceToDevice, kind = CopyKind::DeviceToDevice, device = dst.device.index;
  }
  // Pageable host memory cannot be copied asynchronously (the driver stages it), so like PyTorch
  // a non_blocking copy from or to it is a synchronous one.
  bool async = non_blocking && (pinned || dir == TransferDirection::DeviceToDevice);
  const kernels::Stream handle = stream != nullptr ? stream->handle() : cuda::runtime::compute_stream(device);
  auto start = std::chrono::steady_clock::now();
  cuda::runtime::memcpy(dst.data, src.data, bytes, kind, handle, async);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  TransferLedger::global().record(dir, static_cast<int64_t>(bytes), seconds, pinned, async, tag);
}

}  // namespace ember
