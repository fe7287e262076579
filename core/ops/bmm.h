// Batched matrix products (kernels/bmm.h): a strided-batched GEMM, ember's hand-written CUDA kernel or cuBLAS's
// cublasGemmStridedBatchedEx as ops::set_gemm_backend chooses; OpenBLAS per batch on the CPU.
#pragma once

#include "core/tensor.h"

namespace ember::ops {

// op(a[i]) @ op(b[i]) for every leading index i: a (..., M, K) or (..., K, M) with trans_a, b (..., K, N) or
// (..., N, K) with trans_b, the same leading dims (at least one; no broadcasting), floating, one device.
// Returns (..., M, N) contiguous.
Tensor bmm(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// out = alpha * op(a) @ op(b) + beta * out for every batch, in place (out contiguous (..., M, N)); beta = 1
// accumulates.
void bmm_(Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, double alpha = 1,
          double beta = 0);

}  // namespace ember::ops
