// Every row of the op registry (core/ops/registry.h), in every dtype, at sizes from 1 to past many tiles: run through
// core on cuda:0 and on the cpu from the same inputs, each output within the row's tolerance of the CPU twin's.
// One test case per kernel family; the per-kernel twin tests beside this file keep their NaN-prefilled outputs and
// hand-picked edge cases.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/ops/registry.h"
#include "support/compare.h"
#include "support/emulated_size.h"

using namespace ember;

namespace {

const std::vector<std::string> kFamilies = {"elementwise", "copy",  "random", "linear", "reduce",   "softmax_xent",
                                            "optim",       "guard", "conv",   "pool",   "batchnorm",
                                            "layernorm",   "gelu",  "bmm",    "embedding", "heads", "attention",
                                            "tokens"};

// On a GPU the largest fills about a thousand blocks of 256 threads, yet keeps the GPU check's compute-sanitizer
// runs of every CUDA test short.
std::vector<int64_t> sizes() { return {1, 7, 1000, 4099, test::gpu_or_emulated((int64_t(1) << 18) + 1, 16411)}; }

std::vector<double> host_values(const Tensor& t) { return t.to(Device::cpu()).to(DType::F64).to_vector<double>(); }

void check_case(const ops::OpRow& row, DType dtype, int64_t size) {
  const ops::OpCase c = row.make(size, dtype);
  INFO(row.name << " " << dtype_name(dtype) << " " << c.label << " (" << row.cuda << " vs " << row.cpu << ")");
  const std::vector<Tensor> want = ops::run_on(c, Device::cpu());
  const std::vector<Tensor> got = ops::run_on(c, Device::cuda(0));
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("output " << i << " " << shape_str(want[i].shape()) << ", tolerance " << c.tolerance
                   << " x max(1, max |cpu|)");
    REQUIRE(shape_str(got[i].shape()) == shape_str(want[i].shape()));
    REQUIRE(got[i].dtype() == want[i].dtype());
    const std::vector<double> expected = host_values(want[i]);
    double scale = 1;
    for (double v : expected) scale = std::max(scale, std::fabs(v));
    REQUIRE_CLOSE(host_values(got[i]), expected, (test::Tolerance{c.tolerance * scale, 0}));
  }
}

void check_family(const std::string& family) {
  int rows = 0;
  for (const ops::OpRow& row : ops::op_registry()) {
    if (row.family != family) continue;
    ++rows;
    for (DType dtype : row.dtypes)
      for (int64_t size : sizes()) check_case(row, dtype, size);
  }
  REQUIRE(rows > 0);
}

}  // namespace

TEST_CASE("Op registry on CUDA: every family of rows has its test case below", "[cuda]") {
  std::set<std::string> families;
  for (const ops::OpRow& row : ops::op_registry()) families.insert(row.family);
  CHECK(families == std::set<std::string>(kFamilies.begin(), kFamilies.end()));
}

TEST_CASE("Op registry on CUDA: elementwise rows equal the CPU twin", "[cuda]") { check_family("elementwise"); }
TEST_CASE("Op registry on CUDA: copy rows equal the CPU twin", "[cuda]") { check_family("copy"); }
TEST_CASE("Op registry on CUDA: random rows equal the CPU twin", "[cuda]") { check_family("random"); }
TEST_CASE("Op registry on CUDA: linear rows equal the CPU twin", "[cuda]") { check_family("linear"); }
TEST_CASE("Op registry on CUDA: reduce rows equal the CPU twin", "[cuda]") { check_family("reduce"); }
TEST_CASE("Op registry on CUDA: softmax_xent rows equal the CPU twin", "[cuda]") { check_family("softmax_xent"); }
TEST_CASE("Op registry on CUDA: optim rows equal the CPU twin", "[cuda]") { check_family("optim"); }
TEST_CASE("Op registry on CUDA: guard rows equal the CPU twin", "[cuda]") { check_family("guard"); }
TEST_CASE("Op registry on CUDA: conv rows equal the CPU twin", "[cuda]") { check_family("conv"); }
TEST_CASE("Op registry on CUDA: pool rows equal the CPU twin", "[cuda]") { check_family("pool"); }
TEST_CASE("Op registry on CUDA: batchnorm rows equal the CPU twin", "[cuda]") { check_family("batchnorm"); }
TEST_CASE("Op registry on CUDA: layernorm rows equal the CPU twin", "[cuda]") { check_family("layernorm"); }
TEST_CASE("Op registry on CUDA: gelu rows equal the CPU twin", "[cuda]") { check_family("gelu"); }
TEST_CASE("Op registry on CUDA: bmm rows equal the CPU twin", "[cuda]") { check_family("bmm"); }
TEST_CASE("Op registry on CUDA: tokens rows equal the CPU twin", "[cuda]") { check_family("tokens"); }
TEST_CASE("Op registry on CUDA: embedding rows equal the CPU twin", "[cuda]") { check_family("embedding"); }
TEST_CASE("Op registry on CUDA: heads rows equal the CPU twin", "[cuda]") { check_family("heads"); }
TEST_CASE("Op registry on CUDA: attention rows equal the CPU twin", "[cuda]") { check_family("attention"); }
