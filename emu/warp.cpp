// Warp collectives (shuffles, votes, __syncwarp): a collective completes when the last lane of its mask arrives,
// and every way of calling one that CUDA leaves undefined is an error naming the lane and the line.
#include <cstring>

#include "emu/block.h"
#include "emu/messages.h"

namespace emu::detail {

void Block::check_collective_args(const Thread& t, const Warp& w, Collective kind, unsigned mask, int bytes, int width,
                                  const std::source_location& where) {
  // Messages are built only on the failing path: this check runs for every lane of every collective.
  auto call = [&] { return std::string(name_of(kind)) + "(mask " + hex(mask) + ")"; };
  if (!(mask & (1u << t.lane)))
    fail(call() + " leaves out the calling lane " + std::to_string(t.lane) +
             "; every lane that calls a *_sync intrinsic must be in its mask",
         where);
  if (mask & ~w.lanes)
    fail(call() + " names lane " + std::to_string(first_lane(mask & ~w.lanes)) + ", which does not exist: this warp has " +
             std::to_string(__builtin_popcount(w.lanes)) + " lanes (blocks of " + std::to_string(count_) + " threads)",
         where);
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    fail(call() + " with width " + std::to_string(width) + ": the width must be a power of two from 1 to 32", where);
  if (mask & w.exited)
    fail(call() + " names lane " + std::to_string(first_lane(mask & w.exited)) +
             ", which has exited; every lane named in the mask must arrive",
         where);
  if (mask & w.at_barrier)
    fail(call() + " names lane " + std::to_string(first_lane(mask & w.at_barrier)) + ", which waits at " +
             name_of(barrier_kind_) + " (" + site(barrier_site_) + ")",
         where);
  if (w.pending && (w.kind != kind || w.mask != mask || w.width != width || w.bytes != bytes))
    fail("lane " + std::to_string(t.lane) + " calls " + call() + " while lanes " + hex(w.arrived) + " wait in " +
             name_of(w.kind) + "(mask " + hex(w.mask) + ") at " + site(w.site) +
             "; the lanes of a mask must all make the same call",
         where);
}

void Block::collective(Collective kind, unsigned mask, void* value, int bytes, int arg, int width,
                       const std::source_location& where) {
  Thread& t = *running_;
  Warp& w = warps_[static_cast<size_t>(t.warp)];
  check_collective_args(t, w, kind, mask, bytes, width, where);
  if (!w.pending) {
    w = Warp{w.lanes, w.exited, w.at_barrier, true, kind, mask, 0, width, bytes, where};
  }
  std::memcpy(t.value, value, static_cast<size_t>(bytes));
  t.arg = arg;
  w.arrived |= 1u << t.lane;
  if (w.arrived == mask) {
    complete(w, t.warp);
  } else {
    t.state = State::AtWarp;
    t.waits_at = where;
    suspend(t);
  }
  std::memcpy(value, t.value, static_cast<size_t>(bytes));
}

// Every lane of the mask has arrived: compute each lane's result from the operands, then release them.
void Block::complete(Warp& w, int warp_index) {
  Thread* lane_thread[32] = {};
  for (int l = 0; l < 32; ++l)
    if (w.mask & (1u << l)) lane_thread[l] = &threads_[static_cast<size_t>(warp_index * 32 + l)];
  unsigned char result[32][16];
  const bool vote = w.kind == Collective::Ballot || w.kind == Collective::Any || w.kind == Collective::All;
  unsigned ballot = 0;  // votes carry their predicate (an int) as the operand
  for (int l = 0; l < 32; ++l) {
    int predicate = 0;
    if (vote && lane_thread[l] != nullptr) std::memcpy(&predicate, lane_thread[l]->value, sizeof predicate);
    if (predicate != 0) ballot |= 1u << l;
  }
  for (int l = 0; l < 32; ++l) {
    Thread* t = lane_thread[l];
    if (t == nullptr) continue;
    const int base = l & ~(w.width - 1), end = base + w.width;
    int src = l;
    switch (w.kind) {
      case Collective::Shfl: src = base + (((t->arg % w.width) + w.width) % w.width); break;
      case Collective::ShflUp: src = l - t->arg >= base ? l - t->arg : l; break;
      case Collective::ShflDown: src = l + t->arg < end ? l + t->arg : l; break;
      case Collective::ShflXor:
        if (t->arg < 0 || t->arg > 31) fail("__shfl_xor_sync lane mask " + std::to_string(t->arg) + " is not a lane", w.site);
        src = (l ^ t->arg) < end ? (l ^ t->arg) : l;
        break;
      default: break;
    }
    if (!(w.mask & (1u << src)))
      fail(std::string(name_of(w.kind)) + ": lane " + std::to_string(l) + " reads lane " + std::to_string(src) +
               ", which is not in the mask " + hex(w.mask) + " (its value is undefined on a GPU)",
           w.site, t);
    std::memcpy(result[l], lane_thread[src]->value, static_cast<size_t>(w.bytes));
    if (vote) {
      const int r = w.kind == Collective::Ballot ? static_cast<int>(ballot)
                    : w.kind == Collective::Any  ? ballot != 0
                                                 : ballot == w.mask;
      std::memcpy(result[l], &r, sizeof r);
    }
  }
  for (int l = 0; l < 32; ++l) {
    Thread* t = lane_thread[l];
    if (t == nullptr) continue;
    std::memcpy(t->value, result[l], static_cast<size_t>(w.bytes));
    if (t->state == State::AtWarp) t->state = State::Ready;
  }
  w.pending = false;
  w.arrived = 0;
}

}  // namespace emu::detail
