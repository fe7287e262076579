// CUDA convolution as implicit GEMM: one tiled GEMM kernel whose A and B tiles are gathered on the fly from
// the NCHW tensors by a "problem" (forward, input gradient, weight gradient), so no im2col buffer exists.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/cuda_check.h"
#include "kernels/conv.h"
#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {

namespace {

constexpr int kTile = 64;   // C tile: kTile x kTile outputs per block
constexpr int kTileK = 16;  // reduction slice staged in shared memory per step
constexpr int kThreads = 256;  // 16 x 16 threads, each owning a 4 x 4 strided micro-tile
constexpr int kMicro = 4;
constexpr int kSide = kTile / kMicro;  // 16
constexpr int kBiasThreads = 256;

// Index arithmetic shared by the three problems; sizes are copied in so the device never reads host memory.
struct Dims {
  int64_t N, C, H, W, OC, KH, KW, sh, sw, ph, pw, OH, OW;
  explicit Dims(const Conv2dGeometry& g)
      : N(g.N), C(g.C), H(g.H), W(g.W), OC(g.OC), KH(g.KH), KW(g.KW), sh(g.stride_h), sw(g.stride_w), ph(g.pad_h),
        pw(g.pad_w), OH(g.OH()), OW(g.OW()) {}
  // x[img, c, oh * sh - ph + kh, ow * sw - pw + kw], or 0 in the padding.
  template <typename T>
  __device__ T tap(const T* x, int64_t img, int64_t c, int64_t oh, int64_t ow, int64_t kh, int64_t kw) const {
    const int64_t ih = oh * sh - ph + kh, iw = ow * sw - pw + kw;
    return ih >= 0 && ih < H && iw >= 0 && iw < W ? x[((img * C + c) * H + ih) * W + iw] : T(0);
  }
};

// y (N, OC, P) = weight (OC, CKK) @ im2col(x) (CKK, N * P) + bias: M = OC, N = N * P, K = CKK.
template <typename T> struct ForwardProblem {
  Dims d;
  const T* x;
  const T* w;
  const T* bias;
  T* y;
  int64_t M, N, K;
  __device__ T a(int64_t m, int64_t k) const { return w[m * K + k]; }
  __device__ T b(int64_t k, int64_t n) const {
    const int64_t P = d.OH * d.OW, img = n / P, p = n - img * P, kk = d.KH * d.KW, c = k / kk, r = k - c * kk;
    return d.tap(x, img, c, p / d.OW, p % d.OW, r / d.KW, r % d.KW);
  }
  __device__ void store(int64_t m, int64_t n, T v) const {
    const int64_t P = d.OH * d.OW, img = n / P;
    y[(img * M + m) * P + (n - img * P)] = v + (bias != nullptr ? bias[m] : T(0));
  }
};

// dx (N, C, H * W) = weight^T gathered (C, OC * KH * KW) @ dy gathered: M = C, N = N * H * W, K = OC * KH * KW.
// Input pixel (ih, iw) got tap (kh, kw) of output (oh, ow) when ih = oh * sh - ph + kh (and likewise for w).
template <typename T> struct InputGradProblem {
  Dims d;
  const T* dy;
  const T* w;
  T* dx;
  int64_t M, N, K;
  __device__ T a(int64_t m, int64_t k) const {
    const int64_t kk = d.KH * d.KW, oc = k / kk;
    return w[(oc * d.C + m) * kk + (k - oc * kk)];
  }
  __device__ T b(int64_t k, int64_t n) const {
    const int64_t kk = d.KH * d.KW, oc = k / kk, r = k - oc * kk, kh = r / d.KW, kw = r - kh * d.KW;
    const int64_t HW = d.H * d.W, img = n / HW, pix = n - img * HW, ih = pix / d.W, iw = pix - ih * d.W;
    const int64_t th = ih + d.ph - kh, tw = iw + d.pw - kw;
    if (th < 0 || tw < 0 || th % d.sh != 0 || tw % d.sw != 0) return T(0);
    const int64_t oh = th / d.sh, ow = tw / d.sw;
    return oh < d.OH && ow < d.OW ? dy[((img * d.OC + oc) * d.OH + oh) * d.OW + ow] : T(0);
  }
  __device__ void store(int64_t m, int64_t n, T v) const {
    const int64_t HW = d.H * d.W, img = n / HW;
    dx[(img * M + m) * HW + (n - img * HW)] = v;
  }
};

// Partial dweight (OC, CKK) of one K slice = dy (OC, N * P) @ im2col(x)^T (N * P, CKK): M = OC, N = CKK,
// K = N * P split over blockIdx.z; slice s writes partial[s], summed in slice order afterwards.
template <typename T> struct WeightGradProblem {
  Dims d;
  const T* x;
  const T* dy;
  T* partial;
  int64_t M, N, K;
  __device__ T a(int64_t m, int64_t k) const {
    const int64_t P = d.OH * d.OW, img = k / P;
    return dy[(img * M + m) * P + (k - img * P)];
  }
  __device__ T b(int64_t k, int64_t n) const {
    const int64_t P = d.OH * d.OW, img = k / P, p = k - img * P, kk = d.KH * d.KW, c = n / kk, r = n - c * kk;
    return d.tap(x, img, c, p / d.OW, p % d.OW, r / d.KW, r % d.KW);
  }
  __device__ void store(int64_t m, int64_t n, T v) const { partial[(blockIdx.z * M + m) * N + n] = v; }
};

// C tile (blockIdx.y, blockIdx.x) over the K slice [blockIdx.z * k_chunk, +k_chunk): stage kTileK-deep slices
// of A and B in shared memory, each thread accumulates its 4 x 4 outputs (rows ty + 16 i, columns tx + 16 j).
template <typename T, typename Problem>
__global__ void __launch_bounds__(kThreads) implicit_gemm_kernel(const Problem p, int64_t k_chunk) {
  __shared__ T As[kTileK][kTile];
  __shared__ T Bs[kTileK][kTile];
  const int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTile, n0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t k_begin = static_cast<int64_t>(blockIdx.z) * k_chunk;
  const int64_t k_end = k_begin + k_chunk < p.K ? k_begin + k_chunk : p.K;
  T acc[kMicro][kMicro] = {};
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kTileK) {
#pragma unroll
    for (int r = 0; r < kTile * kTileK / kThreads; ++r) {
      const int e = threadIdx.x + r * kThreads;
      const int ak = e % kTileK, am = e / kTileK;  // A is read along k, B along n: the contiguous directions
      const int bn = e % kTile, bk = e / kTile;
      const int64_t gm = m0 + am, gak = k0 + ak, gn = n0 + bn, gbk = k0 + bk;
      As[ak][am] = gm < p.M && gak < k_end ? p.a(gm, gak) : T(0);
      Bs[bk][bn] = gn < p.N && gbk < k_end ? p.b(gbk, gn) : T(0);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      T a[kMicro], b[kMicro];
#pragma unroll
      for (int i = 0; i < kMicro; ++i) a[i] = As[kk][ty + kSide * i];
#pragma unroll
      for (int j = 0; j < kMicro; ++j) b[j] = Bs[kk][tx + kSide * j];
#pragma unroll
      for (int i = 0; i < kMicro; ++i)
#pragma unroll
        for (int j = 0; j < kMicro; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kMicro; ++i)
#pragma unroll
    for (int j = 0; j < kMicro; ++j) {
      const int64_t gm = m0 + ty + kSide * i, gn = n0 + tx + kSide * j;
      if (gm < p.M && gn < p.N) p.store(gm, gn, acc[i][j]);
    }
}

// dweight[i] += the slices' partials in slice order (fixed, so the result is deterministic).
template <typename T>
__global__ void sum_partials_kernel(const T* __restrict__ partial, int64_t slices, int64_t n, T* __restrict__ dweight) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    T s = dweight[i];
    for (int64_t z = 0; z < slices; ++z) s += partial[z * n + i];
    dweight[i] = s;
  }
}

// dbias[oc] += the sum of dy over images and pixels: a block per output channel, a fixed-order tree.
template <typename T>
__global__ void __launch_bounds__(kBiasThreads) bias_grad_kernel(const T* __restrict__ dy, int64_t N, int64_t OC,
                                                                 int64_t P, T* __restrict__ dbias) {
  __shared__ double scratch[32];
  for (int64_t oc = blockIdx.x; oc < OC; oc += gridDim.x) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < N * P; i += blockDim.x) {
      const int64_t img = i / P;
      s += static_cast<double>(dy[(img * OC + oc) * P + (i - img * P)]);
    }
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) dbias[oc] += static_cast<T>(s);
  }
}

template <typename T, typename Problem> void launch_gemm(const Problem& p, int64_t slices, int64_t k_chunk, Stream stream) {
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return;
  const dim3 grid(static_cast<unsigned>((p.N + kTile - 1) / kTile), static_cast<unsigned>((p.M + kTile - 1) / kTile),
                  static_cast<unsigned>(slices));
  launch_kernel<implicit_gemm_kernel<T, Problem>>(grid, kThreads, 0, stream, p, k_chunk);
  EMBER_LAUNCH_CHECK("implicit_gemm_kernel");
}

// Split-K for the weight gradient: slices of at least 2048 reduction steps, at most 32 of them, the chunk a
// multiple of kTileK. Depends only on the geometry, so the sum order is fixed.
struct SplitK {
  int64_t slices, chunk;
};
SplitK split_k(const Conv2dGeometry& g) {
  const int64_t K = g.N * g.OH() * g.OW();
  const int64_t slices = std::clamp<int64_t>((K + 2047) / 2048, 1, 32);
  int64_t chunk = (K + slices - 1) / slices;
  chunk = (chunk + kTileK - 1) / kTileK * kTileK;
  return {std::max<int64_t>(1, (K + chunk - 1) / std::max<int64_t>(chunk, 1)), std::max<int64_t>(chunk, kTileK)};
}

}  // namespace

template <typename T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* weight, const T* bias, T* y, Stream stream) {
  detail::check_conv2d_geometry("cuda::conv2d_forward", g);
  const ForwardProblem<T> p{Dims(g), x, weight, bias, y, g.OC, g.N * g.OH() * g.OW(), g.CKK()};
  launch_gemm<T>(p, 1, p.K, stream);
}

template <typename T>
void conv2d_backward_input(const Conv2dGeometry& g, const T* dy, const T* weight, T* dx, Stream stream) {
  detail::check_conv2d_geometry("cuda::conv2d_backward_input", g);
  const InputGradProblem<T> p{Dims(g), dy, weight, dx, g.C, g.N * g.H * g.W, g.OC * g.KH * g.KW};
  launch_gemm<T>(p, 1, p.K, stream);
}

size_t conv2d_backward_weight_workspace_elems(const Conv2dGeometry& g) {
  return static_cast<size_t>(split_k(g).slices * g.OC * g.CKK());
}

template <typename T>
void conv2d_backward_weight(const Conv2dGeometry& g, const T* x, const T* dy, T* dweight, T* dbias, T* workspace,
                            Stream stream) {
  detail::check_conv2d_geometry("cuda::conv2d_backward_weight", g);
  const int64_t P = g.OH() * g.OW();
  if (g.N == 0) return;  // nothing to add
  const SplitK s = split_k(g);
  const WeightGradProblem<T> p{Dims(g), x, dy, workspace, g.OC, g.CKK(), g.N * P};
  launch_gemm<T>(p, s.slices, s.chunk, stream);
  const int64_t n = g.OC * g.CKK();
  launch_kernel<sum_partials_kernel<T>>(grid_for(n, kBiasThreads), kBiasThreads, 0, stream, workspace, s.slices, n,
                                        dweight);
  EMBER_LAUNCH_CHECK("sum_partials_kernel");
  if (dbias == nullptr) return;
  launch_kernel<bias_grad_kernel<T>>(static_cast<unsigned>(std::min<int64_t>(g.OC, 65535)), kBiasThreads, 0, stream, dy,
                                     g.N, g.OC, P, dbias);
  EMBER_LAUNCH_CHECK("bias_grad_kernel");
}

#define EMBER_INSTANTIATE_CONV_CUDA(T)                                                                      \
  template void conv2d_forward<T>(const Conv2dGeometry&, const T*, const T*, const T*, T*, Stream);         \
  template void conv2d_backward_input<T>(const Conv2dGeometry&, const T*, const T*, T*, Stream);            \
  template void conv2d_backward_weight<T>(const Conv2dGeometry&, const T*, const T*, T*, T*, T*, Stream);
EMBER_INSTANTIATE_CONV_CUDA(float)
EMBER_INSTANTIATE_CONV_CUDA(double)
#undef EMBER_INSTANTIATE_CONV_CUDA

}  // namespace ember::kernels::cuda
