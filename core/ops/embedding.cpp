// embedding and its backward: devices, dtypes, shapes (in that order), then one dispatch to the host or CUDA kernels.
// An id out of range is a ValueError with the same message on both: the host kernel throws it before reading; on
// CUDA the kernel raises a device flag that the op reads back at once (see report_bad_id).
#include "core/ops/embedding.h"

#include <type_traits>

#include "core/checks.h"
#include "core/dispatch.h"
#include "kernels/embedding.h"

namespace ember::ops {

namespace k = kernels;

namespace {

// weight (V, E) floating and ids int32/int64, on one device with grad_out when there is one (the backward's), in the
// project's order: every device, then the dtypes, then the weight's rank.
void check_weight_ids(const char* op, NamedTensor weight, const Tensor& ids, const Tensor* grad_out = nullptr) {
  if (grad_out != nullptr) check_defined(op, {"grad_output", *grad_out});
  check_defined(op, weight);
  check_defined(op, {"ids", ids});
  check_same_device(op, {weight, {"ids", ids}});
  if (grad_out != nullptr) check_same_device(op, {weight, {"grad_output", *grad_out}});
  check_floating(op, weight);
  if (grad_out != nullptr) check_same_dtype(op, {weight, {"grad_output", *grad_out}});
  check_label_dtype(op, {"ids", ids});
  EMBER_CHECK(weight.tensor.dim() == 2, ShapeError, op, "() expects ", weight.name,
              " of shape (num_embeddings, embedding_dim), but got ", shape_str(weight.tensor.shape()));
}

// ids.shape + [E]: the output's shape, and the gradient's.
Shape rows_shape(const Tensor& ids, int64_t E) {
  Shape s = ids.shape();
  s.push_back(E);
  return s;
}

// The flag starts at n: no bad id.
Tensor new_flag(int64_t n, Device device) { return Tensor::full({1}, static_cast<double>(n), DType::I64, device); }

// Reads the CUDA kernel's flag and throws the host twin's error for the first bad id. Why a synchronous read rather
// than the deferred mailbox of core/deferred.h (which cross_entropy uses and which costs no copy): the error then
// comes from the call that made it, with the id, its position and V in the message, and before the zeros written
// for the bad rows are used by anything else. The price is one 8-byte device-to-host read (a synchronisation of
// the compute stream) per call, which an embedding, run once per step at the model's input, can afford.
template <typename I> void report_bad_id(const char* op, const Tensor& flag, const Tensor& ids, int64_t V) {
  const auto position = flag.item<int64_t>();
  if (position >= ids.numel()) return;
  const auto id = static_cast<int64_t>(ids.view({-1}).select(0, position).item<I>());
  throw ValueError(k::embedding_bad_id_message(op, id, position, V));
}

// Calls fn(ids_pointer) with ids as int32_t* or int64_t*.
template <typename Fn> void visit_ids(const Tensor& ids, Fn&& fn) {
  if (ids.dtype() == DType::I64) fn(ids.data<int64_t>());
  else fn(ids.data<int32_t>());
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const char* op = "embedding";
  check_weight_ids(op, {"weight", weight}, ids);
  const int64_t V = weight.size(0), E = weight.size(1), n = ids.numel();
  Tensor out = Tensor::empty(rows_shape(ids, E), weight.dtype(), weight.device());
  if (weight.device().is_meta()) return out;
  const Tensor wc = weight.contiguous(), ic = ids.contiguous();
  visit_floating(weight.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    visit_ids(ic, [&](const auto* id) {
      using I = std::remove_cv_t<std::remove_pointer_t<decltype(id)>>;
      if (weight.device().is_cpu()) {
        k::cpu::embedding_forward<T, I>(wc.data<T>(), id, out.data<T>(), n, V, E);
        return;
      }
      Tensor flag = new_flag(n, weight.device());
      EMBER_CUDA_CALL(k::cuda::embedding_forward<T, I>(wc.data<T>(), id, out.data<T>(), n, V, E,
                                                       flag.data<int64_t>(), detail::stream_of(weight.device())));
      report_bad_id<I>(op, flag, ic, V);
    });
  });
  return out;
}

void embedding_backward_(Tensor& grad_weight, const Tensor& grad_out, const Tensor& ids) {
  const char* op = "embedding_backward";
  check_weight_ids(op, {"grad_weight", grad_weight}, ids, &grad_out);
  const int64_t V = grad_weight.size(0), E = grad_weight.size(1), n = ids.numel();
  EMBER_CHECK(grad_out.shape() == rows_shape(ids, E), ShapeError, op, "() expects grad_output of shape ",
              shape_str(rows_shape(ids, E)), " (the ids' shape, then embedding_dim), but got ",
              shape_str(grad_out.shape()));
  EMBER_CHECK(grad_weight.is_contiguous(), ValueError, op,
              "() adds into grad_weight in place and needs it contiguous; pass .contiguous() of it and copy back");
  if (grad_weight.device().is_meta()) return;
  const Tensor gc = grad_out.contiguous(), ic = ids.contiguous();
  visit_floating(grad_weight.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    visit_ids(ic, [&](const auto* id) {
      using I = std::remove_cv_t<std::remove_pointer_t<decltype(id)>>;
      if (grad_weight.device().is_cpu()) {
        k::cpu::embedding_backward<T, I>(gc.data<T>(), id, grad_weight.data<T>(), n, V, E);
        return;
      }
      Tensor flag = new_flag(n, grad_weight.device());
      EMBER_CUDA_CALL(k::cuda::embedding_backward<T, I>(gc.data<T>(), id, grad_weight.data<T>(), n, V, E,
                                                        flag.data<int64_t>(), detail::stream_of(grad_weight.device())));
      report_bad_id<I>(op, flag, ic, V);
    });
  });
}

}  // namespace ember::ops
