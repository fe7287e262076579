// Host GELU forward and backward: one pass each, cut into kElementwiseGrain chunks of the host pool (every
// element is computed alone, so the cut changes no result). The form is chosen once per call, outside the loop.
#include "kernels/gelu.h"

#include "kernels/cpu/parallel.h"

namespace ember::kernels::cpu {

namespace {

template <GeluApproximate kForm, typename T> void forward_chunk(const T* x, T* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[i] = gelu_math::forward(x[i], kForm);
}

template <GeluApproximate kForm, typename T>
void backward_chunk(const T* grad_out, const T* x, T* grad_in, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) grad_in[i] = grad_out[i] * gelu_math::derivative(x[i], kForm);
}

}  // namespace

template <typename T> void gelu(const T* x, T* out, int64_t n, GeluApproximate approximate) {
  parallel_chunks(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if (approximate == GeluApproximate::Tanh) forward_chunk<GeluApproximate::Tanh>(x, out, begin, end);
    else forward_chunk<GeluApproximate::None>(x, out, begin, end);
  });
}

template <typename T>
void gelu_backward(const T* grad_out, const T* x, T* grad_in, int64_t n, GeluApproximate approximate) {
  parallel_chunks(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if (approximate == GeluApproximate::Tanh) backward_chunk<GeluApproximate::Tanh>(grad_out, x, grad_in, begin, end);
    else backward_chunk<GeluApproximate::None>(grad_out, x, grad_in, begin, end);
  });
}

template void gelu<float>(const float*, float*, int64_t, GeluApproximate);
template void gelu<double>(const double*, double*, int64_t, GeluApproximate);
template void gelu_backward<float>(const float*, const float*, float*, int64_t, GeluApproximate);
template void gelu_backward<double>(const double*, const double*, double*, int64_t, GeluApproximate);

}  // namespace ember::kernels::cpu
