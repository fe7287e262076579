// One block of an emulated grid: its threads as fibers, its barrier and its warps' collectives, and the
// execution-model rules they are held to (docs/emulation.md, "What is checked").
#pragma once

#include <boost/context/fiber.hpp>

#include <source_location>
#include <string>
#include <vector>

#include "emu/device.h"
#include "emu/exec.h"
#include "emu/fiber.h"

namespace emu::detail {

// A started thread is Running (on a fiber), waits (AtBarrier, AtWarp), is Ready to go on, or is Done.
enum class State { Running, Ready, AtBarrier, AtWarp, Done };

struct Thread {
  ThreadView view;
  int index = 0, lane = 0, warp = 0;
  int stack = 0;  // the pool stack of the fiber it runs on
  State state = State::Done;
  boost::context::fiber fiber;      // the thread's continuation while it waits
  boost::context::fiber scheduler;  // where it goes when it waits
  void* fake_stack = nullptr;       // the sanitizer's slot for this stack
  std::source_location waits_at;
  alignas(16) unsigned char value[16];  // a collective's operand in, its result out
  int arg = 0;
};

struct Warp {
  unsigned lanes = 0;       // lanes that exist (a block's last warp may be partial)
  unsigned exited = 0;      // lanes whose thread has returned
  unsigned at_barrier = 0;  // lanes waiting at the block barrier
  bool pending = false;     // a collective has lanes waiting in it
  Collective kind = Collective::Shfl;
  unsigned mask = 0, arrived = 0;
  int width = 32, bytes = 0;
  std::source_location site;
};

class Block {
 public:
  // Runs every thread of block `index` of `launch` to the end; throws Violation if one breaks a rule.
  void run(const Launch& launch, uint3 index);

  int barrier(Barrier kind, int predicate, const std::source_location& where);
  void collective(Collective kind, unsigned mask, void* value, int bytes, int arg, int width,
                  const std::source_location& where);
  // Records a broken rule (blaming `culprit`, by default the running thread) and unwinds the running thread.
  [[noreturn]] void fail(const std::string& what, const std::source_location& where, const Thread* culprit = nullptr);

  // The block being run on this worker thread, if any.
  static Block* current();

 private:
  void setup(const Launch& launch, uint3 index);
  void start(Thread& t, int i, int stack);
  void start_runner();
  void resume(Thread& t);
  void switch_into(boost::context::fiber&& fiber, int stack);
  boost::context::fiber runner_main(int stack, boost::context::fiber&& scheduler);
  void run_thread(Thread& t);
  void suspend(Thread& t);
  StackBounds bounds(int stack);
  void on_exit(Thread& t);
  void complete(Warp& w, int warp_index);
  void wake_waiting();
  void check_collective_args(const Thread& t, const Warp& w, Collective kind, unsigned mask, int bytes, int width,
                             const std::source_location& where);
  void record(const Thread& t, const std::string& what, const std::source_location& where);
  std::string thread_name(int index) const;
  int barrier_result();

  const Launch* launch_ = nullptr;
  uint3 block_index_{};
  std::vector<Thread> threads_;
  std::vector<Warp> warps_;
  int count_ = 0, next_ = 0, done_ = 0, exited_ = 0, first_exited_ = -1;  // next_: the next thread to start
  Thread* running_ = nullptr;
  Thread* waiting_ = nullptr;  // the thread that last switched back to the scheduler by waiting
  std::vector<int> free_stacks_;
  // The block barrier being gathered.
  int arrived_ = 0, first_arrived_ = -1, accumulator_ = 0;
  Barrier barrier_kind_ = Barrier::Sync;
  std::source_location barrier_site_;
  // The first rule broken; the block unwinds every thread once it is set.
  bool aborting_ = false;
  std::string violation_;

  StackPool stacks_;
  StackBounds scheduler_stack_;
  void* scheduler_fake_stack_ = nullptr;
};

}  // namespace emu::detail
