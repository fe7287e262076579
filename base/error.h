// Typed user errors, the EMBER_CHECK / EMBER_ASSERT macros; header-only so kernels/ may use it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ember {

// Base of every error ember reports to a user; what() is one line that says what to do.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DeviceMismatchError : public Error { using Error::Error; };
class ShapeError : public Error { using Error::Error; };
class DTypeError : public Error { using Error::Error; };
class ValueError : public Error { using Error::Error; };   // a bad argument value (flag, device string, label)
class OutOfMemoryError : public Error { using Error::Error; };
class CudaError : public Error { using Error::Error; };
class DeviceUnavailableError : public Error { using Error::Error; };  // CUDA asked for, none usable
class IoError : public Error { using Error::Error; };
class FormatError : public Error { using Error::Error; };
class NumericalError : public Error { using Error::Error; };  // NaN/Inf where numbers must be finite
class InternalError : public Error { using Error::Error; };  // a broken invariant: a bug in ember

namespace detail {

template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

[[noreturn]] inline void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  throw InternalError(concat("internal error (ember bug): ", cond, " failed at ", file, ":", line,
                             msg.empty() ? "" : ": ", msg));
}

}  // namespace detail
}  // namespace ember

// EMBER_CHECK(cond, ErrorType, message parts...): throws ErrorType with the concatenated parts.
#define EMBER_CHECK(cond, ErrorType, ...)                              \
  do {                                                                 \
    if (!(cond)) throw ErrorType(::ember::detail::concat(__VA_ARGS__)); \
  } while (0)

// EMBER_ASSERT(cond, message parts...): an internal invariant, always on (never plain assert).
#define EMBER_ASSERT(cond, ...)                                                                  \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      ::ember::detail::assert_fail(#cond, __FILE__, __LINE__, ::ember::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
