// Shape and stride arithmetic shared by Tensor and the ops: overflow-checked, with readable errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);  // "[2, 3]"
// Product of the sizes; throws ShapeError on a negative size or an int64 overflow.
int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
// Maps a possibly negative dim into [0, ndim); throws ShapeError naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace ember
