// gemm: FP32 GEMM on the host (OpenBLAS), with ember's hand-written CUDA kernel and with cuBLAS (TF32
// off), on square sizes and on the MLP's layer shapes; GFLOP/s and the kernel as a % of cuBLAS.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/suites.h"
#include "core/ops/linear.h"

namespace ember::bench {

namespace {

struct GemmCase {
  std::string table, name, label;
  bool trans_a, trans_b;
  int64_t M, N, K;
};

std::vector<GemmCase> gemm_cases(bool quick, bool emulated) {
  std::vector<GemmCase> cases;
  const char* square = "square SGEMM, FP32 (FLOPs = 2 M N K)";
  std::vector<int64_t> sizes = emulated ? std::vector<int64_t>{128, 256}
                                : quick  ? std::vector<int64_t>{128, 256, 512, 1024, 4096}
                                         : std::vector<int64_t>{128, 256, 512, 1024, 2048, 4096};
  for (int64_t n : sizes) cases.push_back({square, "sgemm", std::to_string(n) + "^3", false, false, n, n, n});
  // The 784-256-128-10 MLP: y = x W^T forward, dW = dy^T x backward (as nn::Linear runs them).
  const char* mlp = "MLP layer shapes, FP32 (M x N x K)";
  std::vector<int64_t> batches = emulated ? std::vector<int64_t>{128}
                                 : quick  ? std::vector<int64_t>{128, 1024}
                                          : std::vector<int64_t>{32, 128, 512, 1024, 4096};
  const int64_t sizes_mlp[] = {784, 256, 128, 10};
  for (int64_t B : batches) {
    for (int l = 0; l < 3; ++l) {
      int64_t in = sizes_mlp[l], out = sizes_mlp[l + 1];
      cases.push_back({mlp, "mlp_forward", "B=" + std::to_string(B) + " x W" + std::to_string(l + 1) + "^T (" +
                                               std::to_string(B) + "x" + std::to_string(out) + "x" + std::to_string(in) + ")",
                       false, true, B, out, in});
    }
    cases.push_back({mlp, "mlp_weight_grad", "B=" + std::to_string(B) + " dW1 = dy^T x (256x784x" + std::to_string(B) + ")",
                     true, false, 256, 784, B});
  }
  return cases;
}

Row gemm_row(const GemmCase& c, const std::string& column, const char* timer) {
  Row r;
  r.suite = "gemm";
  r.table = c.table;
  r.name = c.name;
  r.label = c.label;
  r.params = {{"M", c.M}, {"N", c.N}, {"K", c.K}, {"trans_a", c.trans_a}, {"trans_b", c.trans_b}};
  r.size = static_cast<double>(c.M);
  r.column = column;
  r.device = column;
  r.timer = timer;
  r.flops = 2.0 * double(c.M) * double(c.N) * double(c.K);
  return r;
}

// The CUDA GEMM ops::matmul_ runs (ember's kernel or cuBLAS) for as long as it lives.
class BackendScope {
 public:
  explicit BackendScope(ops::GemmBackend backend) : saved_(ops::gemm_backend()) { ops::set_gemm_backend(backend); }
  ~BackendScope() { ops::set_gemm_backend(saved_); }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  ops::GemmBackend saved_;
};

// Operands of one case in row-major storage, uniform in [-1, 1).
struct Operands {
  Tensor a, b;
};

Operands make_operands(const GemmCase& c) {
  Shape a_shape = c.trans_a ? Shape{c.K, c.M} : Shape{c.M, c.K};
  Shape b_shape = c.trans_b ? Shape{c.N, c.K} : Shape{c.K, c.N};
  return {Tensor::rand(a_shape, 11, DType::F32, Device::cpu(), -1, 1), Tensor::rand(b_shape, 12, DType::F32, Device::cpu(), -1, 1)};
}

void measure_case(BenchContext& ctx, const GemmCase& c) {
  ctx.progress("gemm: " + c.label);
  // --quick keeps the host to sizes it finishes in well under a second per repetition.
  const bool host_too_big = ctx.quick && double(c.M) * double(c.N) * double(c.K) > 1024.0 * 1024.0 * 1024.0;
  const bool need_host = !host_too_big || ctx.cuda();
  Row cpu_row = gemm_row(c, "cpu", "steady_clock");
  Row cuda_row = gemm_row(c, "cuda", "cuda_events");
  Row cublas_row = gemm_row(c, "cublas", "cuda_events");
  if (!need_host) {
    ctx.add(unmeasured(cpu_row, "skipped: --quick times the host GEMM up to 1024^3"));
    ctx.add(unmeasured(cuda_row, kNoCudaDevice));
    ctx.add(unmeasured(cublas_row, kNoCudaDevice));
    return;
  }
  Operands op = make_operands(c);
  Tensor host_c = Tensor::empty({c.M, c.N});
  auto host_gemm = [&] { ops::matmul_(host_c, op.a, op.b, c.trans_a, c.trans_b); };
  if (host_too_big) {
    host_gemm();  // the reference for the device results, computed once
    ctx.add(unmeasured(cpu_row, "skipped: --quick times the host GEMM up to 1024^3"));
  } else {
    ctx.add(measured(cpu_row, sample_host(host_gemm, ctx.timing)));
  }
  if (!ctx.cuda()) {
    ctx.add(unmeasured(cuda_row, kNoCudaDevice));
    ctx.add(unmeasured(cublas_row, kNoCudaDevice));
    return;
  }
  const Device gpu = Device::cuda(0);
  Tensor a = op.a.to(gpu), b = op.b.to(gpu), out = Tensor::empty({c.M, c.N}, DType::F32, gpu);
  const double tolerance = 1e-5 * double(c.K);
  for (Row* row : {&cuda_row, &cublas_row}) {
    const bool cublas = row == &cublas_row;
    BackendScope backend(cublas ? ops::GemmBackend::Cublas : ops::GemmBackend::Ember);
    auto run = [&] { ops::matmul_(out, a, b, c.trans_a, c.trans_b); };
    run();
    std::vector<float> got = out.to_vector<float>();
    double diff = max_abs_diff(got.data(), host_c.data<float>(), c.M * c.N);
    if (!(diff <= tolerance)) {
      ctx.fail(*row, mismatch(std::string(cublas ? "cuBLAS" : "ember CUDA") + " GEMM differs from OpenBLAS", diff,
                              tolerance));
      continue;
    }
    *row = measured(*row, sample_device(run, *ctx.stream, ctx.timing, ctx.flusher.get()));
  }
  if (cuda_row.measured() && cublas_row.measured()) {
    double pct = 100.0 * cublas_row.stats->median / cuda_row.stats->median;
    char text[64];
    std::snprintf(text, sizeof text, "ember kernel at %.0f%% of cuBLAS", pct);
    cuda_row.extras.push_back({"pct_of_cublas", pct, text});
  }
  if (cuda_row.measured()) ctx.add(cuda_row);
  if (cublas_row.measured()) ctx.add(cublas_row);
}

}  // namespace

void run_gemm(BenchContext& ctx) {
  for (const GemmCase& c : gemm_cases(ctx.quick, ctx.emulated())) measure_case(ctx, c);
}

}  // namespace ember::bench
