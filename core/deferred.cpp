// The per-device error mailbox behind core/deferred.h.
#include "core/deferred.h"

#include <mutex>
#include <vector>

#include "core/cuda_runtime.h"
#include "base/error.h"

namespace ember::detail {

namespace {

struct Mailbox {
  int64_t* host = nullptr;  // mapped pinned memory: the kernel's writes are visible here after a sync
  int64_t* device = nullptr;
  std::string context;
};

std::mutex mailbox_mutex;
std::vector<Mailbox>& mailboxes() {
  static std::vector<Mailbox>* boxes = new std::vector<Mailbox>();  // lives as long as the process
  return *boxes;
}

}  // namespace

int64_t* error_mailbox(Device device, const std::string& context) {
  cuda::require(device);
  std::lock_guard lock(mailbox_mutex);
  auto& boxes = mailboxes();
  if (boxes.size() <= static_cast<size_t>(device.index)) boxes.resize(device.index + 1);
  Mailbox& box = boxes[device.index];
  if (box.host == nullptr) {
    void* dev = nullptr;
    box.host = static_cast<int64_t*>(cuda::runtime::malloc_mapped(sizeof(int64_t), &dev));
    box.device = static_cast<int64_t*>(dev);
    *box.host = -1;
  }
  box.context = context;
  return box.device;
}

void raise_deferred_errors(Device device) {
  std::lock_guard lock(mailbox_mutex);
  auto& boxes = mailboxes();
  if (boxes.size() <= static_cast<size_t>(device.index)) return;
  Mailbox& box = boxes[device.index];
  if (box.host == nullptr) return;
  volatile int64_t* cell = box.host;
  int64_t row = *cell;
  if (row < 0) return;
  *cell = -1;
  throw ValueError(concat(box.context, " (first bad label found at row ", row, " on ", device.str(), ")"));
}

}  // namespace ember::detail
