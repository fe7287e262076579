// ember's ops on Tensors. Each op checks devices, dtypes and shapes (in that order), allocates its
// output on the common device and dispatches once to kernels::cpu or kernels::cuda; on meta
// tensors it only infers the output shape.
#pragma once

#include "core/tensor.h"

namespace ember {
class NonFiniteGuard;  // core/guard.h
}

namespace ember::ops {

// ---- elementwise (same shape, same dtype; floating except fill_) ----------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, double alpha);
// self += alpha * other, in place (gradient accumulation).
void add_(Tensor& self, const Tensor& other, double alpha = 1);
// Sets every element of a contiguous tensor; any dtype.
void fill_(Tensor& self, double value);
// x (rows, cols) + bias (cols), broadcast over rows.
Tensor add_bias(const Tensor& x, const Tensor& bias);
Tensor relu(const Tensor& x);
// grad_out where the forward output y > 0, else 0.
Tensor relu_backward(const Tensor& grad_out, const Tensor& y);
// Dst(x * scale) on x's device: scale 1/255 turns u8 images into f32 in [0, 1].
Tensor cast(const Tensor& x, DType dtype, double scale = 1);
// The same into an existing contiguous tensor with as many elements (shapes may differ), on x's device.
void cast_(Tensor& out, const Tensor& x, double scale = 1);
// Inverted-dropout mask: 1/(1-p) where the stream's uniform value >= p, else 0.
Tensor dropout_mask(const Shape& shape, double p, uint64_t seed, uint64_t offset, DType dtype, Device device);

// ---- linear algebra (2-d, floating) --------------------------------------------------------------
// Which CUDA GEMM runs: ember's hand-written kernel (default) or cuBLAS. The CPU always uses OpenBLAS.
enum class GemmBackend { Ember, Cublas };
void set_gemm_backend(GemmBackend backend);
GemmBackend gemm_backend();
// op(a) @ op(b), op = transpose when the flag is set.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// out = alpha * op(a) @ op(b) + beta * out, in place; beta = 1 accumulates (gradients).
void matmul_(Tensor& out, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, double alpha = 1,
             double beta = 0);
// y = x W^T + b, with ReLU fused into the GEMM epilogue when `relu`. x (B, in), weight (out, in),
// bias (out) or an undefined Tensor for none.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, bool relu = false);
// A Linear layer's GEMMs of backward: grad_weight += grad_out^T x in place (grad_weight (out, in), contiguous) and,
// when input_grad, returns grad_out @ weight (B, in), else an undefined Tensor. Bit for bit what matmul_ then
// matmul give; on the CPU both run in one pool region, so the threads wait once for the slower instead of twice.
// through_relu: x is the output of a ReLU, and the returned gradient goes through it too (relu_backward(dx, x),
// the same bits), on the CPU inside the GEMM's tiles while they are in cache.
Tensor linear_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, Tensor& grad_weight,
                       bool input_grad, bool through_relu = false);

// ---- reductions -------------------------------------------------------------------------------------
Tensor sum(const Tensor& x);   // 0-d tensor
Tensor mean(const Tensor& x);  // 0-d tensor
// Sum over dim 0 of a 2-d tensor: (rows, cols) -> (cols).
Tensor sum_rows(const Tensor& x);
// out = beta * out + sum over dim 0 of x, in place (bias gradients accumulate with beta = 1).
void sum_rows_(Tensor& out, const Tensor& x, double beta);
// Index of the largest value along the last dim of a 2-d tensor: (rows, cols) -> (rows) int64.
Tensor argmax(const Tensor& x);
// Number of rows whose argmax equals the label: a 0-d int64 tensor on the logits' device.
Tensor count_correct(const Tensor& logits, const Tensor& labels);

// ---- softmax and the fused cross-entropy (over the last dim of 2-d tensors) ---------------------------
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
Tensor softmax_backward(const Tensor& y, const Tensor& grad_y);      // y = softmax(x)
Tensor log_softmax_backward(const Tensor& y, const Tensor& grad_y);  // y = log_softmax(x)

struct CrossEntropy {
  Tensor loss;   // 0-d, mean over the batch
  Tensor probs;  // (B, C) softmax, kept for the backward pass
};
// Mean softmax cross-entropy of logits (B, C) against integer labels (B) in [0, C). A label out of
// range throws ValueError (on cuda: at the next synchronisation, e.g. loss.item()).
CrossEntropy cross_entropy(const Tensor& logits, const Tensor& labels);
// d(grad_loss * loss)/d(logits) = (probs - onehot(labels)) * grad_loss / B.
Tensor cross_entropy_backward(const Tensor& probs, const Tensor& labels, double grad_loss = 1);

// ---- optimizer updates (in place, one fused kernel per parameter tensor) -------------------------------
struct SgdOptions {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};
struct AdamWOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
};
// With a guard (same device), the update is skipped when the guard's last check flagged its step.
// momentum_buf: same shape as param when momentum != 0 (undefined otherwise); first_step starts it.
void sgd_step_(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SgdOptions& options, bool first_step,
               const NonFiniteGuard* guard = nullptr);
// step is 1-based (bias corrections); the steps a guard skipped are not counted.
void adamw_step_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWOptions& options,
                 int64_t step, const NonFiniteGuard* guard = nullptr);

}  // namespace ember::ops

namespace ember {
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator*(const Tensor& a, double alpha) { return ops::scale(a, alpha); }
inline Tensor operator*(double alpha, const Tensor& a) { return ops::scale(a, alpha); }
}  // namespace ember
