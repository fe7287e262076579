// CUDA streams and events as ember's code above core uses them, free of CUDA types: the streams ember keeps for
// each device (its ops run on the compute stream; input copies overlap them on the copy stream; collectives run on
// the collective stream), and owned events that order one stream after another or let the host wait.
// Without the CUDA backend every call throws DeviceUnavailableError (an Event never recorded costs nothing).
#pragma once

#include "core/device.h"
#include "kernels/common.h"

namespace ember::cuda {

class Event;

// A handle to one of a device's streams (created on first use, non-blocking, living as long as the process).
class Stream {
 public:
  static Stream compute(Device device);     // every op on `device` runs here
  static Stream copy(Device device);        // the data loader's host -> device copies
  static Stream collective(Device device);  // collectives between ranks (NCCL)

  Device device() const { return device_; }
  // Work queued here from now on waits for `event` (a recorded one); the host does not wait.
  void wait(const Event& event) const;
  // The host waits for all work queued here.
  void synchronize() const;
  // The runtime's handle, for core's copies and the kernels' launchers.
  kernels::Stream handle() const { return handle_; }

 private:
  Stream(Device device, kernels::Stream handle) : device_(device), handle_(handle) {}
  Device device_;
  kernels::Stream handle_;
};

// A point in a stream's work, owned; the runtime's event is created on the first record().
class Event {
 public:
  // timing: the event records a time, for elapsed_ms (benchmarks); otherwise it only orders work.
  explicit Event(bool timing = false) : timing_(timing) {}
  ~Event();  // never throws
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the end of the work queued on `stream` so far.
  void record(const Stream& stream);
  bool recorded() const { return handle_ != nullptr; }
  // The host waits until the recorded work is done; returns at once when never recorded.
  void synchronize() const;
  // Milliseconds between two recorded timing events.
  static float elapsed_ms(const Event& start, const Event& end);
  void* handle() const { return handle_; }

 private:
  bool timing_;
  void* handle_ = nullptr;
};

}  // namespace ember::cuda
