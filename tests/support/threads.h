// ThreadsScope: sets the host kernels' thread count for one test and restores it afterwards.
#pragma once

#include "kernels/cpu/parallel.h"

namespace ember::test {

class ThreadsScope {
 public:
  explicit ThreadsScope(int threads) : saved_(kernels::cpu::num_threads()) { kernels::cpu::set_num_threads(threads); }
  ~ThreadsScope() { kernels::cpu::set_num_threads(saved_); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

}  // namespace ember::test
