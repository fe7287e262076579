// The transfer ledger's bookkeeping and its EMBER_TRACE_TRANSFERS log.
#include "core/transfer_ledger.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace ember {

const char* direction_name(TransferDirection d) {
  switch (d) {
    case TransferDirection::HostToDevice: return "H2D";
    case TransferDirection::DeviceToHost: return "D2H";
    case TransferDirection::DeviceToDevice: return "D2D";
  }
  return "?";
}

TransferLedger::TransferLedger() {
  const char* env = std::getenv("EMBER_TRACE_TRANSFERS");
  trace_ = env != nullptr && std::strcmp(env, "0") != 0 && *env != '\0';
}

TransferLedger& TransferLedger::global() {
  static TransferLedger ledger;
  return ledger;
}

void TransferLedger::record(TransferDirection dir, int64_t bytes, double seconds, bool pinned, bool async,
                            const char* tag) {
  std::lock_guard lock(mutex_);
  TransferStats& s = stats_[static_cast<int>(dir)];
  s.count++;
  s.bytes += bytes;
  s.seconds += seconds;
  if (dir != TransferDirection::DeviceToDevice) (pinned ? s.pinned : s.pageable)++;
  (async ? s.async : s.sync)++;
  if (trace_) {
    std::fprintf(stderr, "[ember transfer] %s %lld bytes %s %s %.1f us (%s)\n", direction_name(dir),
                 static_cast<long long>(bytes),
                 dir == TransferDirection::DeviceToDevice ? "device" : (pinned ? "pinned" : "pageable"),
                 async ? "async" : "sync", seconds * 1e6, tag);
  }
}

TransferStats TransferLedger::stats(TransferDirection dir) const {
  std::lock_guard lock(mutex_);
  return stats_[static_cast<int>(dir)];
}

void TransferLedger::reset() {
  std::lock_guard lock(mutex_);
  for (auto& s : stats_) s = TransferStats{};
}

std::string TransferLedger::summary() const {
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  bool any = false;
  for (int i = 0; i < 3; ++i) {
    const TransferStats& s = stats_[i];
    if (s.count == 0) continue;
    any = true;
    out << direction_name(static_cast<TransferDirection>(i)) << ": " << s.count << " copies, "
        << static_cast<double>(s.bytes) / 1e6 << " MB";
    if (i != 2) out << " (" << s.pinned << " pinned, " << s.pageable << " pageable";
    else out << " (";
    out << (i != 2 ? ", " : "") << s.async << " async, " << s.sync << " sync)\n";
  }
  if (!any) out << "no copies between host and device\n";
  return out.str();
}

}  // namespace ember
