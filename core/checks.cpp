// Argument checks shared by every op (core/checks.h).
#include "core/checks.h"

#include <map>
#include <sstream>
#include <vector>

namespace ember {

namespace {

std::string join_names(const std::vector<const char*>& names) {
  std::ostringstream out;
  for (size_t i = 0; i < names.size(); ++i) out << (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") << names[i];
  return out.str();
}

}  // namespace

void check_same_device(const char* op, std::initializer_list<NamedTensor> args) {
  if (args.size() < 2) return;
  Device first = args.begin()->tensor.device();
  bool same = true;
  for (const auto& a : args) same = same && a.tensor.device() == first;
  if (same) return;

  // Suggest moving the arguments that are not where most of them (ties: the later ones, usually
  // parameters) live.
  std::map<std::string, int> votes;
  Device target = first;
  int best = 0;
  for (const auto& a : args) {
    int v = ++votes[a.tensor.device().str()];
    if (v >= best) { best = v; target = a.tensor.device(); }
  }
  std::ostringstream got;
  std::vector<const char*> movers, stayers;
  Device other = first;
  size_t i = 0;
  for (const auto& a : args) {
    got << (i == 0 ? "" : i + 1 == args.size() ? " and " : ", ") << a.name << " on " << a.tensor.device().str();
    if (a.tensor.device() == target) stayers.push_back(a.name);
    else { movers.push_back(a.name); other = a.tensor.device(); }
    ++i;
  }
  throw DeviceMismatchError(detail::concat(
      "Expected all tensors to be on the same device, but ", op, "() got ", got.str(), ". Move ", join_names(movers),
      " with .to(", target.str(), "), or ", join_names(stayers), " with .to(", other.str(), ")."));
}

void check_same_dtype(const char* op, std::initializer_list<NamedTensor> args) {
  if (args.size() < 2) return;
  DType first = args.begin()->tensor.dtype();
  for (const auto& a : args) {
    if (a.tensor.dtype() == first) continue;
    std::ostringstream got;
    size_t i = 0;
    for (const auto& b : args)
      got << (i++ == 0 ? "" : ", ") << b.name << " is " << dtype_name(b.tensor.dtype());
    throw DTypeError(detail::concat(op, "() expects tensors of one dtype, but ", got.str(), ". Convert with .to(",
                                    dtype_name(first), ")."));
  }
}

void check_same_shape(const char* op, NamedTensor a, NamedTensor b) {
  EMBER_CHECK(a.tensor.shape() == b.tensor.shape(), ShapeError, op, "() expects ", a.name, " and ", b.name,
              " of the same shape, but got ", a.name, " ", shape_str(a.tensor.shape()), " and ", b.name, " ",
              shape_str(b.tensor.shape()));
}

void check_defined(const char* op, NamedTensor a) {
  EMBER_CHECK(a.tensor.defined(), ValueError, op, "() got an undefined tensor for ", a.name);
}

void check_dim(const char* op, NamedTensor a, int64_t ndim) {
  EMBER_CHECK(a.tensor.dim() == ndim, ShapeError, op, "() expects ", a.name, " with ", ndim, " dimension(s), but got shape ",
              shape_str(a.tensor.shape()));
}

void check_dtype(const char* op, NamedTensor a, DType expected) {
  EMBER_CHECK(a.tensor.dtype() == expected, DTypeError, op, "() expects ", a.name, " of dtype ", dtype_name(expected),
              ", but got ", dtype_name(a.tensor.dtype()), ". Convert with .to(", dtype_name(expected), ").");
}

void check_floating(const char* op, NamedTensor a) {
  EMBER_CHECK(is_floating(a.tensor.dtype()), DTypeError, op, "() expects ", a.name,
              " of a floating dtype (float32 or float64), but got ", dtype_name(a.tensor.dtype()),
              ". Convert with .to(float32).");
}

void check_grad_output(const char* op, const Tensor& grad_out, const Tensor& x) {
  check_defined(op, {"grad_output", grad_out});
  check_defined(op, {"input", x});
  check_same_device(op, {{"grad_output", grad_out}, {"input", x}});
  check_same_dtype(op, {{"grad_output", grad_out}, {"input", x}});
  check_floating(op, {"input", x});
  check_same_shape(op, {"grad_output", grad_out}, {"input", x});
}

void check_label_dtype(const char* op, NamedTensor a) {
  EMBER_CHECK(a.tensor.dtype() == DType::I32 || a.tensor.dtype() == DType::I64, DTypeError, op, "() expects ", a.name,
              " of an integer dtype (int32 or int64), but got ", dtype_name(a.tensor.dtype()),
              ". Convert with .to(int64).");
}

}  // namespace ember
