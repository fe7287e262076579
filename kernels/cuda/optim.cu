// Fused SGD and AdamW updates on the GPU: one grid-stride pass per tensor, 128-bit loads where aligned.
// The guard is read from device memory by every thread (one cached word), so a skip costs no host sync.
#include <cmath>
#include <cstdint>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/optim.h"
#include "kernels/cuda/launch.cuh"

namespace ember::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// 16 bytes of T moved as one int4: a single 128-bit load/store (4 floats or 2 doubles).
template <typename T>
struct alignas(16) Packed {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

template <typename T>
__device__ __forceinline__ Packed<T> load_packed(const T* address) {
  Packed<T> out;
  *reinterpret_cast<int4*>(&out) = *reinterpret_cast<const int4*>(address);
  return out;
}

template <typename T>
__device__ __forceinline__ void store_packed(T* address, const Packed<T>& value) {
  *reinterpret_cast<int4*>(address) = *reinterpret_cast<const int4*>(&value);
}

// Per-update scalars, derived once on the host (never per element).
template <typename T>
struct SgdScalars {
  T lr, momentum, one_minus_dampening, weight_decay;
  bool decay, use_momentum, first_step, nesterov;
};

// Same arithmetic, in the same order, as the CPU twin (and torch): the flags are uniform across the
// grid, so these branches never diverge.
template <typename T>
__device__ __forceinline__ void sgd_element(T& param, T grad, T& buf, const SgdScalars<T>& s) {
  T g = grad;
  if (s.decay) g = g + s.weight_decay * param;
  if (s.use_momentum) {
    const T b = s.first_step ? g : s.momentum * buf + s.one_minus_dampening * g;
    buf = b;
    g = s.nesterov ? g + s.momentum * b : b;
  }
  param = param - s.lr * g;
}

template <typename T>
__device__ __forceinline__ void adamw_element(T& param, T grad, T& m, T& v, const AdamWScalars<T>& s) {
  const T mi = s.beta1 * m + s.one_minus_beta1 * grad;
  const T vi = s.beta2 * v + s.one_minus_beta2 * grad * grad;
  m = mi;
  v = vi;
  const T denom = sqrt(vi) / s.bias_correction2_sqrt + s.eps;
  param = param * s.decay - s.step_size * mi / denom;
}

// Elements [0, n_vec * W) move as packs of W (n_vec = 0 when a pointer is misaligned), the rest one by one.
template <typename T>
__global__ void sgd_kernel(T* param, const T* grad, T* buf, int64_t n, int64_t n_vec, SgdScalars<T> s,
                           const GuardState* guard) {
  if (guard != nullptr && guard->skip != 0) return;
  constexpr int W = Packed<T>::kSize;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // The buffer is read only when it holds state; on the first step it is written, never read.
  const bool read_buf = s.use_momentum && !s.first_step;
  for (int64_t i = tid; i < n_vec; i += stride) {
    const int64_t base = i * W;
    Packed<T> p = load_packed(param + base);
    const Packed<T> g = load_packed(grad + base);
    Packed<T> b{};
    if (read_buf) b = load_packed(buf + base);
#pragma unroll
    for (int k = 0; k < W; ++k) sgd_element(p.v[k], g.v[k], b.v[k], s);
    store_packed(param + base, p);
    if (s.use_momentum) store_packed(buf + base, b);
  }
  for (int64_t i = n_vec * W + tid; i < n; i += stride) {
    T p = param[i];
    T b = read_buf ? buf[i] : T(0);
    sgd_element(p, grad[i], b, s);
    param[i] = p;
    if (s.use_momentum) buf[i] = b;
  }
}

// `s` holds the host's scalars for p.step; after skipped steps the guard moves the step back, and the
// scalars are derived again here by the same function the CPU twin uses.
template <typename T>
__global__ void adamw_kernel(T* param, const T* grad, T* m, T* v, int64_t n, int64_t n_vec, AdamWScalars<T> s,
                             AdamWParams<T> p, const GuardState* guard) {
  if (guard != nullptr && guard->skip != 0) return;
  if (guard != nullptr && guard->skipped != 0) s = adamw_scalars(p, adamw_applied_step(p.step, guard));
  constexpr int W = Packed<T>::kSize;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = tid; i < n_vec; i += stride) {
    const int64_t base = i * W;
    Packed<T> p = load_packed(param + base);
    const Packed<T> g = load_packed(grad + base);
    Packed<T> mp = load_packed(m + base);
    Packed<T> vp = load_packed(v + base);
#pragma unroll
    for (int k = 0; k < W; ++k) adamw_element(p.v[k], g.v[k], mp.v[k], vp.v[k], s);
    store_packed(param + base, p);
    store_packed(m + base, mp);
    store_packed(v + base, vp);
  }
  for (int64_t i = n_vec * W + tid; i < n; i += stride) {
    T p = param[i], mi = m[i], vi = v[i];
    adamw_element(p, grad[i], mi, vi, s);
    param[i] = p;
    m[i] = mi;
    v[i] = vi;
  }
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Packs when every pointer the kernel touches is 16-byte aligned; otherwise all elements go scalar.
template <typename T>
int64_t packed_count(int64_t n, bool all_aligned) {
  return all_aligned ? n / Packed<T>::kSize : 0;
}

// One thread per pack plus one per tail element; the grid-stride loops cover whatever grid_for caps.
template <typename T>
unsigned blocks_for(int64_t n, int64_t n_vec) {
  return grid_for(n_vec + (n - n_vec * Packed<T>::kSize), kThreads);
}

}  // namespace

template <typename T>
void sgd_step(T* param, const T* grad, T* momentum_buf, int64_t n, SgdParams<T> p, Stream stream,
              const GuardState* guard) {
  detail::check_sgd_args(n, momentum_buf, p);
  if (n == 0) return;  // an empty tensor may come with null pointers
  const bool use_momentum = p.momentum != 0;
  const SgdScalars<T> s{p.lr,           p.momentum,   T(1) - p.dampening, p.weight_decay, p.weight_decay != 0,
                        use_momentum,   p.first_step, p.nesterov};
  const bool all_aligned = aligned16(param) && aligned16(grad) && (!use_momentum || aligned16(momentum_buf));
  const int64_t n_vec = packed_count<T>(n, all_aligned);
  launch_kernel<sgd_kernel<T>>(blocks_for<T>(n, n_vec), kThreads, 0, stream, param, grad,
                               use_momentum ? momentum_buf : nullptr, n, n_vec, s, guard);
  EMBER_LAUNCH_CHECK("sgd_kernel");
}

template <typename T>
void adamw_step(T* param, const T* grad, T* m, T* v, int64_t n, AdamWParams<T> p, Stream stream,
                const GuardState* guard) {
  detail::check_adamw_args(n, p);
  if (n == 0) return;
  // Host scalars in double, exactly as the CPU twin derives them, so both backends see the same values.
  const AdamWScalars<T> s = adamw_scalars(p, p.step);
  const bool all_aligned = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v);
  const int64_t n_vec = packed_count<T>(n, all_aligned);
  launch_kernel<adamw_kernel<T>>(blocks_for<T>(n, n_vec), kThreads, 0, stream, param, grad, m, v, n, n_vec, s, p,
                                 guard);
  EMBER_LAUNCH_CHECK("adamw_kernel");
}

template void sgd_step<float>(float*, const float*, float*, int64_t, SgdParams<float>, Stream, const GuardState*);
template void sgd_step<double>(double*, const double*, double*, int64_t, SgdParams<double>, Stream, const GuardState*);
template void adamw_step<float>(float*, const float*, float*, float*, int64_t, AdamWParams<float>, Stream,
                                const GuardState*);
template void adamw_step<double>(double*, const double*, double*, double*, int64_t, AdamWParams<double>, Stream,
                                 const GuardState*);

}  // namespace ember::kernels::cuda
