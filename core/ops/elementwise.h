// Elementwise ops (kernels/elementwise.h): same shape, same dtype, floating except fill_.
#pragma once

#include "core/tensor.h"

namespace ember::ops {

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

}  // namespace ember::ops

namespace ember {
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator*(const Tensor& a, double alpha) { return ops::scale(a, alpha); }
inline Tensor operator*(double alpha, const Tensor& a) { return ops::scale(a, alpha); }
}  // namespace ember
