// 2-d batch normalisation over NCHW tensors (statistics per channel over N, H, W), PyTorch's rules:
// training normalises with the batch mean and biased variance and moves the running statistics by
// `momentum` towards the batch mean and the unbiased variance; eval normalises with the running ones.
// An optional ReLU is fused into the forward pass (and its mask into backward), for BatchNorm -> ReLU.
#pragma once

#include <cstdint>

#include "kernels/common.h"

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
