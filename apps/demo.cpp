// `ember demo`: the device-placement lesson in five steps: pick the device, make a tensor, move it,
// show where it lives, and show the error when an op mixes devices.
#include <cstdio>
#include <iostream>

#include "apps/commands.h"
#include "core/ops.h"
#include "core/transfer_ledger.h"

namespace ember::apps {

namespace {

void run_demo() {
  std::cout << "1. Pick the device: Device::best() -> " << Device::best().str() << "  ("
            << (cuda::is_available() ? "a usable GPU was found" : cuda::unavailable_reason()) << ")\n";
  Device device = Device::best();

  Tensor x = Tensor::arange(6).view({2, 3});
  std::cout << "2. Make a tensor on the host:\n   x = " << x << "\n";

  TransferLedger::global().reset();
  Tensor y = x.to(device);
  std::cout << "3. Move it: y = x.to(" << device.str() << ")\n   y = " << y << "\n";
  std::cout << "   copies so far: " << TransferLedger::global().summary();

  std::cout << "4. Where it lives: x.device() = " << x.device().str() << ", y.device() = " << y.device().str()
            << "\n";

  // The mismatch: a real one when a GPU exists, else with a meta tensor standing in for "another device".
  Tensor other = device.is_cuda() ? x : Tensor::empty({2, 3}, DType::F32, Device::meta());
  std::cout << "5. Mix devices in one op: add(y, " << (device.is_cuda() ? "x" : "a meta tensor") << ")\n";
  try {
    ops::add(y, other);
    std::cout << "   (no error: both tensors are on " << device.str() << ")\n";
  } catch (const DeviceMismatchError& e) {
    std::cout << "   DeviceMismatchError: " << e.what() << "\n";
  }
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto* sub = app.add_subcommand("demo", "Walk through device placement: pick, create, move, inspect, mismatch");
  register_action(sub, run_demo);
}

}  // namespace ember::apps
