// Stream and Event over core's CUDA runtime glue (core/cuda_runtime.h).
#include "core/stream.h"

#include <cstdio>
#include <utility>

#include "core/cuda_runtime.h"

namespace ember::cuda {

Stream Stream::compute(Device device) { return {device, runtime::compute_stream(device.index)}; }
Stream Stream::copy(Device device) { return {device, runtime::copy_stream(device.index)}; }
Stream Stream::collective(Device device) { return {device, runtime::collective_stream(device.index)}; }

void Stream::wait(const Event& event) const {
  if (event.recorded()) runtime::stream_wait_event(handle_, event.handle());
}

void Stream::synchronize() const { runtime::stream_synchronize(handle_); }

Event::~Event() {
  if (handle_ != nullptr) runtime::event_destroy(handle_);
}

Event::Event(Event&& other) noexcept : timing_(other.timing_), handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) runtime::event_destroy(handle_);
    timing_ = other.timing_;
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void Event::record(const Stream& stream) {
  if (handle_ == nullptr) handle_ = timing_ ? runtime::event_create_timed() : runtime::event_create();
  runtime::event_record(handle_, stream.handle());
}

void Event::synchronize() const {
  if (handle_ != nullptr) runtime::event_synchronize(handle_);
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  return runtime::event_elapsed_ms(start.handle_, end.handle_);
}

}  // namespace ember::cuda
