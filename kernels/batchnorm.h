// 2-d batch normalisation over NCHW tensors (statistics per channel over N, H, W), PyTorch's rules:
// training normalises with the batch mean and biased variance and moves the running statistics by
// `momentum` towards the batch mean and the unbiased variance; eval normalises with the running ones.
// An optional ReLU is fused into the forward pass (and its mask into backward), for BatchNorm -> ReLU.
#pragma once

#include <cstdint>

#include "kernels/common.h"
#include "kernels/pool.h"

namespace ember::kernels {

struct BatchNormGeometry {
  int64_t N, C, HW;  // x (N, C, HW), contiguous
};

template <typename T>
struct BatchNormTrainArgs {
  const T* x;
  const T* weight;  // (C), may be null (affine=False: scale 1)
  const T* bias;    // (C), may be null (shift 0)
  T* y;
  T* save_mean;     // (C): the batch mean, kept for backward
  T* save_invstd;   // (C): 1 / sqrt(biased batch variance + eps)
  T* running_mean;  // (C), updated in place; both may be null (track_running_stats=False)
  T* running_var;
  int64_t* num_batches_tracked;  // incremented when not null
  T momentum, eps;
  bool relu;
};

template <typename T>
struct BatchNormBackwardArgs {
  const T* x;
  const T* dy;
  const T* weight;       // may be null (scale 1)
  const T* mean;         // (C): the forward's save_mean, or the running mean it used in eval mode
  const T* invstd;       // (C): the forward's save_invstd
  const T* relu_output;  // the fused forward's output: dy counts only where it is > 0; null without ReLU
  T* dx;                 // overwritten
  T* dweight;            // += sum(dy * xhat); may be null
  T* dbias;              // += sum(dy); may be null
  bool batch_stats;      // the forward normalised with batch statistics (training), so they depend on x
};

namespace detail {
// N * HW >= 2 in training (a variance needs two values, as PyTorch says), positive C and HW, eps > 0.
void check_batch_norm(const char* name, const BatchNormGeometry& g, bool training, double eps);
}  // namespace detail

namespace cpu {
template <typename T> void batch_norm_forward_train(const BatchNormGeometry& g, const BatchNormTrainArgs<T>& a);
// y = (x - running_mean) / sqrt(running_var + eps) * weight + bias [, ReLU]; save_invstd (may be null)
// receives 1 / sqrt(running_var + eps) for backward.
template <typename T>
void batch_norm_forward_eval(const BatchNormGeometry& g, const T* x, const T* weight, const T* bias,
                             const T* running_mean, const T* running_var, T eps, bool relu, T* y, T* save_invstd);
template <typename T> void batch_norm_backward(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a);

// BatchNorm -> ReLU -> MaxPool2d as one kernel (the CNN's block; host only, its CUDA form runs the two kernels):
// each normalised (image, channel) plane is pooled while it is in the cache, so the full-size ReLU output is never
// written, and backward rebuilds each plane's masked gradient the same way. The bits of the kernels one after the
// other. p: the pool's geometry over x (N, C, H, W); y, argmax and (backward) dy and relu_output (the pooled
// output) are (N, C, OH, OW); a.relu is implied.
template <typename T>
void batch_norm_relu_pool_forward_train(const Pool2dGeometry& p, const BatchNormTrainArgs<T>& a, int32_t* argmax);
template <typename T>
void batch_norm_relu_pool_forward_eval(const Pool2dGeometry& p, const T* x, const T* weight, const T* bias,
                                       const T* running_mean, const T* running_var, T eps, T* y, int32_t* argmax,
                                       T* save_invstd);
template <typename T>
void batch_norm_relu_pool_backward(const Pool2dGeometry& p, const BatchNormBackwardArgs<T>& a, const int32_t* argmax);
}  // namespace cpu

namespace cuda {
// A block per channel: the statistics (two passes, a fixed-order tree), then the normalised output.
template <typename T>
void batch_norm_forward_train(const BatchNormGeometry& g, const BatchNormTrainArgs<T>& a, Stream stream);
template <typename T>
void batch_norm_forward_eval(const BatchNormGeometry& g, const T* x, const T* weight, const T* bias,
                             const T* running_mean, const T* running_var, T eps, bool relu, T* y, T* save_invstd,
                             Stream stream);
// A block per channel: both sums, then dx, in one launch.
template <typename T>
void batch_norm_backward(const BatchNormGeometry& g, const BatchNormBackwardArgs<T>& a, Stream stream);
}  // namespace cuda

}  // namespace ember::kernels
