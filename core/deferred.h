// Errors a CUDA kernel finds but cannot throw (a label out of range): the kernel writes the bad
// row into a per-device mailbox in mapped host memory, and the host raises the error at its next
// synchronisation (item(), to_vector(), cuda::synchronize()) without an extra copy.
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"

namespace ember::detail {

// Device-visible address of the mailbox (-1 = no error). `context` describes the op for the message,
// e.g. "cross_entropy(): labels must be in [0, 10)".
int64_t* error_mailbox(Device device, const std::string& context);
// Throws ValueError if a kernel posted an error since the last call; resets the mailbox.
void raise_deferred_errors(Device device);

}  // namespace ember::detail
