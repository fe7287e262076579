// The argument checks every op runs before touching memory: device, dtype, shape. Each throws the
// typed error with a message naming the op, each argument and the fix.
#pragma once

#include <initializer_list>

#include "core/tensor.h"

namespace ember {

struct NamedTensor {
  const char* name;
  const Tensor& tensor;
};

// "Expected all tensors to be on the same device, but add() got self on cpu and other on cuda:0. ..."
void check_same_device(const char* op, std::initializer_list<NamedTensor> args);
void check_same_dtype(const char* op, std::initializer_list<NamedTensor> args);
void check_same_shape(const char* op, NamedTensor a, NamedTensor b);
void check_defined(const char* op, NamedTensor a);
void check_dim(const char* op, NamedTensor a, int64_t ndim);
void check_dtype(const char* op, NamedTensor a, DType expected);
void check_floating(const char* op, NamedTensor a);
void check_label_dtype(const char* op, NamedTensor a);  // int32 or int64
// A backward's grad_output against its floating input: both defined, then device, dtype, shape in that order.
void check_grad_output(const char* op, const Tensor& grad_out, const Tensor& x);

}  // namespace ember
