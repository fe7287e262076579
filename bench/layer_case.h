// One layer-sized op measured on the host and on the device, the device result checked against the host's first:
// what the conv and attention suites share.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/suites.h"

namespace ember::bench {

struct LayerCase {
  std::string suite, table, name, label;
  int64_t batch = 0;
  double flops = 0, bytes = 0;
  std::vector<Tensor> inputs;                             // on the host
  std::function<Tensor(const std::vector<Tensor>&)> run;  // on the inputs' device
};

// A cpu row and a cuda row for `c` (the cuda one unmeasured without a device, failed when it differs from the cpu's
// result by more than 1e-3 relative to the largest value).
void measure_layer(BenchContext& ctx, const LayerCase& c);

// Uniform in [-1, 1) on the host.
Tensor uniform(const Shape& s, uint64_t seed);

}  // namespace ember::bench
