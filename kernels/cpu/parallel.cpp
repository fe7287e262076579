// The worker threads behind parallel_ranges: started on first use, asleep on a condition variable between
// jobs (no spinning: the cores are shared with OpenBLAS's own threads), one job at a time.
#include "kernels/cpu/parallel.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ember::kernels::cpu::workers {

namespace {

class Workers {
 public:
  void run(int64_t parts, const std::function<void(int64_t)>& part) {
    std::lock_guard<std::mutex> one_job(job_mutex_);  // callers from several threads take turns
    grow(parts - 1);
    std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      part_ = &part;
      errors_ = &errors;
      parts_ = parts;
      pending_ = parts - 1;
      ++generation_;
    }
    wake_.notify_all();
    call(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  ~Workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void call(int64_t t) {
    try {
      (*part_)(t);
    } catch (...) {
      (*errors_)[static_cast<size_t>(t)] = std::current_exception();
    }
  }

  void grow(int64_t count) {
    while (static_cast<int64_t>(threads_.size()) < count) {
      const int64_t index = static_cast<int64_t>(threads_.size()) + 1;  // part 0 is the caller's
      threads_.emplace_back([this, index] { loop(index); });
    }
  }

  // Worker `index` runs part `index` of every job that has that many parts.
  void loop(int64_t index) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= parts_) continue;
      lock.unlock();
      call(index);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex job_mutex_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int64_t)>* part_ = nullptr;
  std::vector<std::exception_ptr>* errors_ = nullptr;
  int64_t parts_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace

void run_parts(int64_t parts, const std::function<void(int64_t)>& part) {
  static Workers workers;
  workers.run(parts, part);
}

}  // namespace ember::kernels::cpu::workers
