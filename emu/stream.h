// Emulated streams and events. A stream is a worker thread running its queue in order; by default it starts
// only when something needs its results (a synchronisation, an event wait, a query), so a missing
// synchronisation reads stale data every time instead of once in a while (docs/emulation.md).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace emu::detail {

struct Task {
  std::function<void()> run;
  // Work (kernels, copies, GEMMs) is skipped once the device has failed; control tasks (event records,
  // waits) always run, so nothing that waits on them hangs.
  bool is_work = true;
};

class Stream {
 public:
  Stream(int device, bool blocking, bool legacy);
  ~Stream();  // runs what is queued, then stops the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  bool blocking() const { return blocking_; }
  bool legacy() const { return legacy_; }

  // Queues a task and returns its position (1 = the first task ever queued here).
  uint64_t enqueue(Task task);
  uint64_t enqueued();
  bool idle();
  // Lets the worker run everything queued so far.
  void kick();
  // Kicks, then blocks until the task at `position` (and all before it) has run.
  void wait_until(uint64_t position);
  void synchronize() { wait_until(enqueued()); }
  bool has_run(uint64_t position);

 private:
  void work();

  const int device_;
  const bool blocking_, legacy_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Task> queue_;
  uint64_t enqueued_ = 0, executed_ = 0, kicked_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

class Event : public std::enable_shared_from_this<Event> {
 public:
  explicit Event(bool timing) : timing_(timing) {}
  bool timing() const { return timing_; }

  // Host side of cudaEventRecord: returns the task that completes this record on `stream`.
  Task record(Stream* stream);
  // The latest record at call time, and the stream it was made on (null if never recorded).
  uint64_t latest(Stream** stream);
  void wait_for(uint64_t generation);
  bool completed(uint64_t generation);
  std::chrono::steady_clock::time_point when();

 private:
  const bool timing_;
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t recorded_ = 0, completed_ = 0;
  Stream* stream_ = nullptr;
  std::chrono::steady_clock::time_point when_{};
};

}  // namespace emu::detail
