// Fibers for the threads of an emulated block: boost.context switches (far cheaper than ucontext's, which
// enter the kernel) on stacks with guard pages, annotated so AddressSanitizer follows every switch.
#pragma once

#include <boost/context/fiber.hpp>

#include <cstddef>
#include <vector>

namespace emu::detail {

// Stacks for up to 1024 fibers, mapped once per worker thread and reused by every block it runs.
class StackPool {
 public:
  StackPool();
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  // Usable bytes [base, base + size) of stack i (mapped on first use, a guard page below it).
  char* base(int i);
  size_t size() const { return size_; }

 private:
  size_t size_;
  std::vector<char*> mappings_;
};

// Before a new fiber starts on a pool stack: the sanitizer forgets what the last fiber there left poisoned
// (a finished fiber's outermost frames never return, so their scope poisoning would stay).
void reuse_stack(char* base, size_t size);

// One side of a switch: the stack being left and the one being entered, as the sanitizer needs them.
struct StackBounds {
  const void* bottom = nullptr;
  size_t size = 0;
};

// Wraps boost::context::fiber::resume with the sanitizer's start/finish calls. `save` is the leaving
// stack's fake-stack slot (nullptr when the leaving fiber is finished for good).
boost::context::fiber switch_to(boost::context::fiber&& target, const StackBounds& target_stack, void** save,
                                StackBounds* came_from = nullptr);
// Called first thing on a fiber's own stack; reports the stack it came from.
void entered(void* save, StackBounds* came_from);
// Called right before a finished fiber returns to `target`.
void leaving_for_good(const StackBounds& target);

// The stack allocator boost.context asks for a fiber's stack: hands out one pool slot.
struct PooledStack {
  char* base;
  size_t size;
  boost::context::stack_context allocate() {
    boost::context::stack_context c;
    c.size = size;
    c.sp = base + size;
    return c;
  }
  void deallocate(boost::context::stack_context&) noexcept {}
};

}  // namespace emu::detail
