// TransferLedger: process-wide counts of every copy that crosses PCIe (H2D, D2H) or stays on the GPU (D2D).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

namespace ember {

enum class TransferDirection : uint8_t { HostToDevice, DeviceToHost, DeviceToDevice };

const char* direction_name(TransferDirection d);  // "H2D", "D2H", "D2D"

struct TransferStats {
  int64_t count = 0;
  int64_t bytes = 0;
  // Host time spent in the copy call: the whole copy for a synchronous one, only the enqueue for
  // an async one (its transfer overlaps other work, which is the point).
  double seconds = 0;
  int64_t pinned = 0, pageable = 0;  // host side of H2D/D2H copies (D2D counts neither)
  int64_t sync = 0, async = 0;
};

class TransferLedger {
 public:
  static TransferLedger& global();

  // `pinned` is whether the host side was page-locked; `tag` names the caller for traces.
  void record(TransferDirection dir, int64_t bytes, double seconds, bool pinned, bool async, const char* tag);
  TransferStats stats(TransferDirection dir) const;
  void reset();
  // One line per direction that saw copies, e.g. "H2D: 469 copies, 183.8 MB (469 pinned, 469 async)".
  std::string summary() const;

 private:
  TransferLedger();
  mutable std::mutex mutex_;
  TransferStats stats_[3];
  bool trace_ = false;  // EMBER_TRACE_TRANSFERS=1 logs each copy to stderr
};

}  // namespace ember
