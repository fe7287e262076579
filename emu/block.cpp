// The block scheduler: threads run as fibers in index order until they wait or end; a barrier completes when its
// last participant arrives (warp collectives: emu/warp.cpp); every rule CUDA leaves undefined is an error here.
#include "emu/block.h"
#include "emu/messages.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace emu::detail {

constinit thread_local const ThreadView* current_view = nullptr;

namespace {

namespace ctx = boost::context;

thread_local Block* running_block = nullptr;

// Thrown into a waiting thread when its block is aborted, to unwind its kernel frames.
struct AbortThread {};

std::string dims(uint3 v) { return detail::dims(v.x, v.y, v.z); }

}  // namespace

[[noreturn]] void outside_kernel(const char* what) {
  if (probing)  // a kernel without the instrumented entry is running its body in the launch probe
    throw std::logic_error(std::string("ember emulator: a kernel read ") + what +
                           " before emu::kernel_entry: its file was not instrumented (docs/emulation.md)");
  std::fprintf(stderr, "ember emulator: %s read outside a kernel (host code has no thread index)\n", what);
  std::abort();
}

Block* Block::current() { return running_block; }

std::string Block::thread_name(int index) const {
  return "thread " + dims(threads_[static_cast<size_t>(index)].view.thread_idx);
}

void Block::setup(const Launch& launch, uint3 index) {
  launch_ = &launch;
  block_index_ = index;
  const dim3 b = launch.block;
  count_ = static_cast<int>(b.x * b.y * b.z);
  if (threads_.size() < static_cast<size_t>(count_)) threads_.resize(static_cast<size_t>(count_));
  const int warps = (count_ + 31) / 32;
  warps_.assign(static_cast<size_t>(warps), Warp{});
  for (int w = 0; w < warps; ++w) {
    const int lanes = std::min(32, count_ - 32 * w);
    warps_[static_cast<size_t>(w)].lanes = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
  }
  next_ = done_ = exited_ = arrived_ = 0;
  first_exited_ = first_arrived_ = -1;
  aborting_ = false;
  violation_.clear();
  free_stacks_.clear();
  for (int i = count_ - 1; i >= 0; --i) free_stacks_.push_back(i);
}

// Thread `i` gets its indices when it starts (most kernels never wait, so most threads are started and
// finished on one runner fiber without a switch).
void Block::start(Thread& t, int i, int stack) {
  const dim3 b = launch_->block;
  const unsigned u = static_cast<unsigned>(i);
  t.view = ThreadView{uint3{u % b.x, u / b.x % b.y, u / (b.x * b.y)}, block_index_, b, launch_->grid};
  t.index = i;
  t.lane = i % 32;
  t.warp = i / 32;
  t.stack = stack;
  t.fake_stack = nullptr;
  t.state = State::Running;
}

void Block::run(const Launch& launch, uint3 index) {
  setup(launch, index);
  running_block = this;
  while (done_ < count_) {
    bool progressed = false;
    for (int i = 0; i < next_; ++i) {
      Thread& t = threads_[static_cast<size_t>(i)];
      if (t.state == State::Ready) {
        progressed = true;
        resume(t);
      }
    }
    if (next_ < count_ && aborting_) {  // an aborted block starts no one new
      done_ += count_ - next_;
      next_ = count_;
    } else if (next_ < count_) {
      progressed = true;
      start_runner();
    }
    if (!progressed && !aborting_) {
      Thread& t = *std::find_if(threads_.begin(), threads_.begin() + next_,
                                [](const Thread& x) { return x.state != State::Done; });
      record(t, "deadlock: no thread of the block can go on", t.waits_at);
    }
    if (aborting_) wake_waiting();
  }
  running_block = nullptr;
  if (aborting_) throw Violation(cudaErrorLaunchFailure, violation_);
}

StackBounds Block::bounds(int stack) { return StackBounds{stacks_.base(stack), stacks_.size()}; }

// A continuation that comes back to the scheduler belongs to the thread that just waited on that fiber.
void Block::switch_into(ctx::fiber&& fiber, int stack) {
  ctx::fiber back = switch_to(std::move(fiber), bounds(stack), &scheduler_fake_stack_);
  if (back) waiting_->fiber = std::move(back);
  current_view = nullptr;
  running_ = nullptr;
}

void Block::start_runner() {
  const int stack = free_stacks_.back();
  free_stacks_.pop_back();
  reuse_stack(stacks_.base(stack), stacks_.size());
  ctx::fiber runner(std::allocator_arg, PooledStack{stacks_.base(stack), stacks_.size()},
                    [this, stack](ctx::fiber&& scheduler) { return runner_main(stack, std::move(scheduler)); });
  switch_into(std::move(runner), stack);
}

void Block::resume(Thread& t) {
  t.state = State::Running;
  running_ = &t;
  current_view = &t.view;
  switch_into(std::move(t.fiber), t.stack);
}

// Runs not-yet-started threads one after another on this fiber, until one of them waits (the fiber then
// stays with that thread) or none is left.
ctx::fiber Block::runner_main(int stack, ctx::fiber&& scheduler) {
  entered(nullptr, &scheduler_stack_);
  ctx::fiber back = std::move(scheduler);
  while (next_ < count_ && !aborting_) {
    const int i = next_++;
    Thread& t = threads_[static_cast<size_t>(i)];
    start(t, i, stack);
    t.scheduler = std::move(back);
    running_ = &t;
    current_view = &t.view;
    run_thread(t);
    back = std::move(t.scheduler);  // the latest way back, if t waited on the way
  }
  free_stacks_.push_back(stack);  // safe: the scheduler reuses it only after this fiber has left
  leaving_for_good(scheduler_stack_);
  return back;
}

void Block::run_thread(Thread& t) {
  try {
    launch_->body();
    on_exit(t);
  } catch (const AbortThread&) {
  } catch (const std::exception& e) {
    record(t, std::string("the kernel threw an exception: ") + e.what(), std::source_location{});
  } catch (...) {
    record(t, "the kernel threw an exception", std::source_location{});
  }
  t.state = State::Done;
  ++done_;
}

void Block::suspend(Thread& t) {
  waiting_ = &t;
  t.scheduler = switch_to(std::move(t.scheduler), scheduler_stack_, &t.fake_stack);
  if (aborting_) throw AbortThread{};
}

void Block::wake_waiting() {
  for (int i = 0; i < count_; ++i) {
    State& s = threads_[static_cast<size_t>(i)].state;
    if (s == State::AtBarrier || s == State::AtWarp) s = State::Ready;
  }
}

void Block::record(const Thread& t, const std::string& what, const std::source_location& where) {
  if (aborting_) return;  // the first broken rule is the one to report
  aborting_ = true;
  violation_ = "ember emulator: " + what + " [kernel " + launch_->kernel->name + ", block " + dims(block_index_) +
               ", " + thread_name(t.index) + ", " + site(where) + "]";
  std::fprintf(stderr, "%s\n", violation_.c_str());
}

void Block::fail(const std::string& what, const std::source_location& where, const Thread* culprit) {
  record(culprit != nullptr ? *culprit : *running_, what, where);
  throw AbortThread{};
}

int Block::barrier(Barrier kind, int predicate, const std::source_location& where) {
  Thread& t = *running_;
  Warp& w = warps_[static_cast<size_t>(t.warp)];
  const unsigned me = 1u << t.lane;
  const std::string name = name_of(kind);  // short enough for the small-string buffer: no allocation
  if (exited_ > 0)
    fail("barrier divergence: it reaches " + name + " after " + thread_name(first_exited_) +
             " of its block has exited; every thread of a block must reach every barrier",
         where);
  if (w.pending && (w.mask & me) && !(w.arrived & me))
    fail("it waits at " + name + " while lanes of its warp wait for it in " + name_of(w.kind) + " (" + site(w.site) + ")",
         where);
  if (arrived_ == 0) {
    barrier_kind_ = kind;
    barrier_site_ = where;
    first_arrived_ = t.index;
    accumulator_ = kind == Barrier::And ? 1 : 0;
  } else if (kind != barrier_kind_ || !same_site(where, barrier_site_)) {
    fail("barrier divergence: it waits at " + name + " (" + site(where) + ") while " + thread_name(first_arrived_) +
             " waits at " + name_of(barrier_kind_) + " (" + site(barrier_site_) + ")",
         where);
  }
  const int p = predicate != 0;
  accumulator_ = kind == Barrier::And ? (accumulator_ & p) : kind == Barrier::Or ? (accumulator_ | p) : accumulator_ + p;
  ++arrived_;
  w.at_barrier |= me;
  if (arrived_ < count_) {
    t.state = State::AtBarrier;
    t.waits_at = where;
    suspend(t);
    return t.arg;
  }
  const int result = barrier_result();
  for (int i = 0; i < count_; ++i) {
    Thread& other = threads_[static_cast<size_t>(i)];
    other.arg = result;
    if (other.state == State::AtBarrier) other.state = State::Ready;
  }
  for (Warp& each : warps_) each.at_barrier = 0;
  arrived_ = 0;
  return result;
}

int Block::barrier_result() { return barrier_kind_ == Barrier::Sync ? 0 : accumulator_; }

void Block::on_exit(Thread& t) {
  Warp& w = warps_[static_cast<size_t>(t.warp)];
  const unsigned me = 1u << t.lane;
  if (arrived_ > 0)
    record(t,
           "barrier divergence: it exits while " + std::to_string(arrived_) + " thread(s) wait at " +
               name_of(barrier_kind_) + " (" + site(barrier_site_) + "); every thread of a block must reach every barrier",
           barrier_site_);
  if (w.pending && (w.mask & me) && !(w.arrived & me))
    record(t,
           std::string("it exits while lanes ") + hex(w.arrived) + " wait for it in " + name_of(w.kind) + "(mask " +
               hex(w.mask) + ")",
           w.site);
  w.exited |= me;
  ++exited_;
  if (first_exited_ < 0) first_exited_ = t.index;
}

// ---- the entry points the device language calls (emu/device.h) ---------------------------------------------

namespace {
Block& block_of(const char* what) {
  Block* b = Block::current();
  if (b == nullptr) outside_kernel(what);
  return *b;
}
}  // namespace

int block_barrier(Barrier kind, int predicate, const std::source_location& where) {
  return block_of(name_of(kind)).barrier(kind, predicate, where);
}

void warp_collective(Collective kind, unsigned mask, void* value, int bytes, int arg, int width,
                     const std::source_location& where) {
  block_of(name_of(kind)).collective(kind, mask, value, bytes, arg, width, where);
}

void trap(const std::source_location& where) { block_of("__trap").fail("__trap() was called", where); }

}  // namespace emu::detail
