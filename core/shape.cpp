// Shape helpers: printing, overflow-checked element counts, strides, dim wrapping.
#include "core/shape.h"

#include <limits>
#include <sstream>

#include "base/error.h"

namespace ember {

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    EMBER_CHECK(s >= 0, ShapeError, "invalid shape ", shape_str(shape), ": sizes must be >= 0");
    EMBER_CHECK(s == 0 || n <= std::numeric_limits<int64_t>::max() / s, ShapeError, "invalid shape ",
                shape_str(shape), ": the element count overflows int64");
    n *= s;
  }
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    // An empty tensor may have sizes whose product overflows; its strides are never used to
    // address an element, so saturate instead of overflowing.
    if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1), &stride))
      stride = std::numeric_limits<int64_t>::max();
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t wrapped = dim < 0 ? dim + ndim : dim;
  EMBER_CHECK(wrapped >= 0 && wrapped < ndim, ShapeError, op, "(): dim ", dim, " is out of range for a tensor of ",
              ndim, " dimension(s) (valid: ", -ndim, "..", ndim - 1, ")");
  return wrapped;
}

}  // namespace ember
