// Fiber stacks (mmap, guard page, lazily mapped) and sanitizer-annotated switches.
#include "emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

namespace emu::detail {

namespace {

constexpr int kMaxThreadsPerBlock = 1024;

size_t page_bytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// 64 KiB holds any kernel frame ember has (the largest, the GEMM's micro tile, is about 1 KiB); sanitizer
// builds get more for their redzones. EMBER_EMU_STACK_KB overrides.
size_t stack_bytes() {
  size_t kib = EMU_ASAN ? 256 : 64;
  if (const char* env = std::getenv("EMBER_EMU_STACK_KB")) kib = std::strtoul(env, nullptr, 10);
  return (kib * 1024 + page_bytes() - 1) / page_bytes() * page_bytes();
}

}  // namespace

StackPool::StackPool() : size_(stack_bytes()), mappings_(kMaxThreadsPerBlock, nullptr) {}

StackPool::~StackPool() {
  for (char* m : mappings_)
    if (m != nullptr) munmap(m, size_ + page_bytes());
}

char* StackPool::base(int i) {
  char*& m = mappings_.at(static_cast<size_t>(i));
  if (m == nullptr) {
    const size_t page = page_bytes();
    void* p = mmap(nullptr, size_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("ember emulator: cannot map a fiber stack of " + std::to_string(size_));
    // Stacks grow down: the lowest page faults on overflow instead of running into the next stack.
    mprotect(p, page, PROT_NONE);
    m = static_cast<char*>(p);
  }
  return m + page_bytes();
}

void reuse_stack(char* base, size_t size) {
#if EMU_ASAN
  __asan_unpoison_memory_region(base, size);
#else
  (void)base;
  (void)size;
#endif
}

boost::context::fiber switch_to(boost::context::fiber&& target, const StackBounds& target_stack, void** save,
                                StackBounds* came_from) {
#if EMU_ASAN
  __sanitizer_start_switch_fiber(save, target_stack.bottom, target_stack.size);
#else
  (void)target_stack;
#endif
  boost::context::fiber back = std::move(target).resume();
#if EMU_ASAN
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(save != nullptr ? *save : nullptr, &bottom, &size);
  if (came_from != nullptr) *came_from = StackBounds{bottom, size};
#else
  (void)save;
  (void)came_from;
#endif
  return back;
}

void entered(void* save, StackBounds* came_from) {
#if EMU_ASAN
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(save, &bottom, &size);
  if (came_from != nullptr) *came_from = StackBounds{bottom, size};
#else
  (void)save;
  (void)came_from;
#endif
}

void leaving_for_good(const StackBounds& target) {
#if EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, target.bottom, target.size);
#else
  (void)target;
#endif
}

}  // namespace emu::detail
