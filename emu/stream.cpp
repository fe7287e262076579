// Stream workers (lazy by default, EMBER_EMU_STREAMS=eager starts each task at once) and events.
#include "emu/stream.h"

#include <cstdlib>
#include <cstring>
#include <exception>

#include "emu/exec.h"
#include "emu/state.h"

namespace emu::detail {

namespace {

bool eager_streams() {
  static const bool eager = [] {
    const char* env = std::getenv("EMBER_EMU_STREAMS");
    return env != nullptr && std::strcmp(env, "eager") == 0;
  }();
  return eager;
}

// A lazy stream starts by itself once this much is queued, so a host that never synchronises cannot pile
// up unbounded work (the same count on every run, so the schedule stays a function of the program).
constexpr uint64_t kMaxQueued = 4096;

}  // namespace

Stream::Stream(int device, bool blocking, bool legacy)
    : device_(device), blocking_(blocking), legacy_(legacy), worker_([this] { work(); }) {}

Stream::~Stream() {
  synchronize();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

uint64_t Stream::enqueue(Task task) {
  uint64_t position;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
    position = ++enqueued_;
    if (eager_streams() || enqueued_ - executed_ >= kMaxQueued) kicked_ = enqueued_;
  }
  changed_.notify_all();
  return position;
}

uint64_t Stream::enqueued() {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_;
}

bool Stream::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return executed_ == enqueued_;
}

void Stream::kick() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kicked_ = enqueued_;
  }
  changed_.notify_all();
}

void Stream::wait_until(uint64_t position) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (kicked_ < position) {
    kicked_ = enqueued_;
    changed_.notify_all();
  }
  changed_.wait(lock, [&] { return executed_ >= position; });
}

bool Stream::has_run(uint64_t position) {
  std::lock_guard<std::mutex> lock(mutex_);
  return executed_ >= position;
}

void Stream::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || executed_ < kicked_; });
    if (executed_ == kicked_ && stopping_) return;
    Task task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    if (!task.is_work || !device_failed()) {
      try {
        task.run();
      } catch (const Violation& v) {
        fail_device(v.code(), v.what());
      } catch (const std::exception& e) {
        fail_device(cudaErrorLaunchFailure, std::string("ember emulator: a device task failed: ") + e.what());
      }
    }
    lock.lock();
    ++executed_;
    changed_.notify_all();
  }
}

Task Event::record(Stream* stream) {
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation = ++recorded_;
    stream_ = stream;
  }
  // The task owns the event: cudaEventDestroy on a pending event is legal and frees it only after.
  return Task{[self = shared_from_this(), generation] {
                {
                  std::lock_guard<std::mutex> lock(self->mutex_);
                  self->when_ = std::chrono::steady_clock::now();
                  if (generation > self->completed_) self->completed_ = generation;
                }
                self->changed_.notify_all();
              },
              /*is_work=*/false};
}

uint64_t Event::latest(Stream** stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream != nullptr) *stream = stream_;
  return recorded_;
}

void Event::wait_for(uint64_t generation) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return completed_ >= generation; });
}

bool Event::completed(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= generation;
}

std::chrono::steady_clock::time_point Event::when() {
  std::lock_guard<std::mutex> lock(mutex_);
  return when_;
}

}  // namespace emu::detail
