// The transfer ledger counts, resets and summarises copies; host-only parts (CUDA copies are in tests/cuda).
#include <catch2/catch.hpp>

#include "core/transfer_ledger.h"

using namespace ember;

TEST_CASE("The ledger counts copies by direction, host memory kind and sync mode", "[core]") {
  TransferLedger& l = TransferLedger::global();
  l.reset();
  CHECK(l.summary() == "no copies between host and device\n");
  l.record(TransferDirection::HostToDevice, 100, 0.5, true, true, "test");
  l.record(TransferDirection::HostToDevice, 28, 0.25, false, false, "test");
  l.record(TransferDirection::DeviceToDevice, 7, 0.0, false, true, "test");
  TransferStats h2d = l.stats(TransferDirection::HostToDevice);
  CHECK(h2d.count == 2);
  CHECK(h2d.bytes == 128);
  CHECK(h2d.seconds == 0.75);
  CHECK(h2d.pinned == 1);
  CHECK(h2d.pageable == 1);
  CHECK(h2d.async == 1);
  CHECK(h2d.sync == 1);
  TransferStats d2d = l.stats(TransferDirection::DeviceToDevice);
  CHECK(d2d.count == 1);
  CHECK(d2d.pinned + d2d.pageable == 0);
  CHECK(l.stats(TransferDirection::DeviceToHost).count == 0);
  CHECK_THAT(l.summary(), Catch::Contains("H2D: 2 copies") && Catch::Contains("1 pinned, 1 pageable") &&
                              Catch::Contains("D2D: 1 copies"));
  l.reset();
  CHECK(l.stats(TransferDirection::HostToDevice).count == 0);
}
