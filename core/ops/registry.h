// The op registry: one row per op reachable through core (its CPU twin, CUDA kernels, dtypes and a maker of
// deterministic cases), iterated by the twin tests, the meta shape test and `ember bench --suite ops`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::ops {

// One instance of an op at one size.
struct OpCase {
  std::string label;           // "n=1K", "129x257", "2x3x31x31 k3 s2 p1", ...
  int64_t elements = 0;        // elements of the main operand: the size a benchmark plots and the crossover counts
  std::vector<Tensor> inputs;  // on the host, filled deterministically (fixed seeds)
  // Runs the op through core on `device` with `args` (the inputs, all on `device`; in-place ops mutate them) and
  // returns its outputs, on `device` (a host-side result, such as the guard's report, may come back on the cpu).
  std::function<std::vector<Tensor>(Device device, std::vector<Tensor>& args)> run;
  double bytes = 0;      // read + written by one run, for GB/s; 0: the inputs' bytes plus the outputs' bytes
  double tolerance = 0;  // max |cuda - cpu| allowed per output, relative to max(1, max |cpu|); 0: bit for bit
};

struct OpRow {
  const char* name;    // unique: "add", "linear_relu", "batch_norm_eval"
  const char* op;      // the core entry point it runs: "ops::linear", "Tensor::contiguous", "NonFiniteGuard::check"
  const char* family;  // kernels/<family>.h, kernels/cpu/<family>.cpp, kernels/cuda/<family>.cu
  const char* cpu;     // the CPU twin(s) it dispatches to: "cpu::add" (comma-separated when several)
  const char* cuda;    // the CUDA kernel(s): "cuda::softmax_xent_forward, cuda::sum"
  std::vector<DType> dtypes;                   // the dtype `make` is given: the main operand's
  OpCase (*make)(int64_t size, DType dtype);  // a case of about `size` elements (at least 1), with odd shapes
  const char* bench = nullptr;    // the table title when `ember bench --suite ops` times this row; null: not timed
  const char* no_meta = nullptr;  // why the op refuses meta tensors (its meta run must throw); null: infers shapes
};

// Every row, grouped by family (the MLP's families first, then the CNN's, then the Transformer's).
const std::vector<OpRow>& op_registry();
// The row called `name`; ValueError naming the rows when there is none.
const OpRow& op_row(const std::string& name);

// The case's inputs on `device`: clones on the cpu (in-place ops must not touch the case), copies elsewhere.
std::vector<Tensor> inputs_on(const OpCase& c, Device device);
// Runs the case on `device` from fresh copies of its inputs.
std::vector<Tensor> run_on(const OpCase& c, Device device);
// bytes, or the inputs' plus these outputs' bytes when the case did not count them.
double counted_bytes(const OpCase& c, const std::vector<Tensor>& outputs);
// Names of a row's cpu or cuda column, split at the commas, without spaces: {"cuda::softmax_xent_forward", ...}.
std::vector<std::string> kernel_names(const char* column);

}  // namespace ember::ops
