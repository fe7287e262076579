// What the emulator's messages say about a call: the intrinsic's name, the source line, a lane mask.
#pragma once

#include <cstdio>
#include <cstring>
#include <source_location>
#include <string>

#include "emu/device.h"

namespace emu::detail {

inline const char* name_of(Collective kind) {
  switch (kind) {
    case Collective::Shfl: return "__shfl_sync";
    case Collective::ShflUp: return "__shfl_up_sync";
    case Collective::ShflDown: return "__shfl_down_sync";
    case Collective::ShflXor: return "__shfl_xor_sync";
    case Collective::Ballot: return "__ballot_sync";
    case Collective::Any: return "__any_sync";
    case Collective::All: return "__all_sync";
    case Collective::SyncWarp: return "__syncwarp";
  }
  return "?";
}

inline const char* name_of(Barrier kind) {
  switch (kind) {
    case Barrier::Sync: return "__syncthreads";
    case Barrier::Or: return "__syncthreads_or";
    case Barrier::And: return "__syncthreads_and";
    case Barrier::Count: return "__syncthreads_count";
  }
  return "?";
}

inline std::string site(const std::source_location& where) {
  if (where.line() == 0) return "unknown line";
  std::string file = where.file_name();
#ifdef EMU_SOURCE_ROOT
  const std::string root = EMU_SOURCE_ROOT;
  if (file.compare(0, root.size(), root) == 0) file = file.substr(root.size());
#endif
  return file + ":" + std::to_string(where.line());
}

inline bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() && std::strcmp(a.file_name(), b.file_name()) == 0;
}

inline std::string hex(unsigned mask) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", mask);
  return buf;
}

// The lowest lane set in `bits` (bits != 0).
inline int first_lane(unsigned bits) { return __builtin_ctz(bits); }

}  // namespace emu::detail
