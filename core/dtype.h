// Element types of tensors: f32 everywhere, f64 for gradient checks, i32/i64 labels, u8 images.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "base/error.h"

namespace ember {

enum class DType : uint8_t { F32, F64, I32, I64, U8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 0;
}

// PyTorch's spelling, so messages and printouts read the same.
constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::F32 || t == DType::F64; }

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  else if constexpr (std::is_same_v<T, double>) return DType::F64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::U8;
  else static_assert(sizeof(T) == 0, "ember: unsupported element type");
}

// Calls f with a value of the C++ type that t stands for: f(float{}) for F32, ...
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    case DType::U8: return f(uint8_t{});
  }
  throw InternalError("visit_dtype: unknown dtype");
}

// Same, restricted to the floating types; others throw a DTypeError naming the op.
template <typename F>
decltype(auto) visit_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
    default: break;
  }
  throw DTypeError(detail::concat(op, "() expects a floating tensor (float32 or float64), but got ",
                                  dtype_name(t), ". Convert it first with .to(DType::F32)."));
}

}  // namespace ember
