// Tensor: factories, views, placement and printing.
#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "core/deferred.h"
#include "core/dispatch.h"
#include "core/transfer.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/random.h"

namespace ember {

namespace k = kernels;

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)), shape_(std::move(shape)), strides_(std::move(strides)), offset_(offset),
      numel_(shape_numel(shape_)), dtype_(dtype), device_(storage_->device()) {}

// ---- factories --------------------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, bool pinned) {
  int64_t n = shape_numel(shape);
  EMBER_CHECK(n <= std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(dtype)), ShapeError,
              "tensor of shape ", shape_str(shape), " and dtype ", dtype_name(dtype), " is too large to address");
  auto storage = Storage::allocate(static_cast<size_t>(n) * dtype_size(dtype), device, pinned);
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T v = static_cast<T>(value);
    switch (device.type) {
      case DeviceType::CPU: k::cpu::fill<T>(t.data<T>(), t.numel(), v); break;
      case DeviceType::CUDA: EMBER_CUDA_CALL(k::cuda::fill<T>(t.data<T>(), t.numel(), v, detail::stream_of(device))); break;
      case DeviceType::Meta: break;
    }
  });
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0, dtype, device); }
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1, dtype, device); }

Tensor Tensor::arange(double start, double end, double step, DType dtype, Device device) {
  EMBER_CHECK(step != 0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(end), ValueError,
              "arange(", start, ", ", end, ", ", step, "): start and end must be finite and step non-zero");
  double count = std::ceil((end - start) / step);
  int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  Tensor host = empty({n}, dtype, Device::cpu());
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = host.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return host.to(device);
}

Tensor Tensor::from_data(const void* data, int64_t count, const Shape& shape, DType dtype, Device device) {
  EMBER_CHECK(shape_numel(shape) == count, ShapeError, "from_data(): ", count, " values do not fill shape ",
              shape_str(shape), " (", shape_numel(shape), " elements)");
  Tensor t = empty(shape, dtype, device);
  transfer({t.raw_data(), device, false}, {const_cast<void*>(data), Device::cpu(), false}, t.nbytes(), false,
           "from_data");
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, const Shape& strides, DType dtype, Device device,
                         std::function<void()> deleter) {
  Shape st = strides.empty() ? contiguous_strides(shape) : strides;
  EMBER_CHECK(st.size() == shape.size(), ShapeError, "from_blob(): ", st.size(), " strides for shape ",
              shape_str(shape));
  int64_t numel = shape_numel(shape), last = 0;  // the furthest element, in elements from data
  for (size_t d = 0; d < shape.size(); ++d) {
    EMBER_CHECK(st[d] >= 0, ValueError, "from_blob(): negative strides are not supported (stride ", st[d],
                " of dim ", d, "); make a contiguous copy first");
    if (numel > 0) last += (shape[d] - 1) * st[d];
  }
  size_t nbytes = numel > 0 ? static_cast<size_t>(last + 1) * dtype_size(dtype) : 0;
  auto storage = Storage::wrap(data, nbytes, device, std::move(deleter));
  return Tensor(std::move(storage), shape, std::move(st), 0, dtype);
}

Tensor Tensor::rand(const Shape& shape, uint64_t seed, DType dtype, Device device, double low, double high,
                    uint64_t offset) {
  Tensor t = empty(shape, dtype, device);
  visit_floating(dtype, "rand", [&](auto zero) {
    using T = decltype(zero);
    switch (device.type) {
      case DeviceType::CPU: k::cpu::uniform<T>(t.data<T>(), t.numel(), seed, offset, T(low), T(high)); break;
      case DeviceType::CUDA:
        EMBER_CUDA_CALL(k::cuda::uniform<T>(t.data<T>(), t.numel(), seed, offset, T(low), T(high), detail::stream_of(device)));
        break;
      case DeviceType::Meta: break;
    }
  });
  return t;
}

Tensor Tensor::randn(const Shape& shape, uint64_t seed, DType dtype, Device device, double mean, double std,
                     uint64_t offset) {
  Tensor t = empty(shape, dtype, device);
  visit_floating(dtype, "randn", [&](auto zero) {
    using T = decltype(zero);
    switch (device.type) {
      case DeviceType::CPU: k::cpu::normal<T>(t.data<T>(), t.numel(), seed, offset, T(mean), T(std)); break;
      case DeviceType::CUDA:
        EMBER_CUDA_CALL(k::cuda::normal<T>(t.data<T>(), t.numel(), seed, offset, T(mean), T(std), detail::stream_of(device)));
        break;
      case DeviceType::Meta: break;
    }
  });
  return t;
}

// ---- properties -------------------------------------------------------------------------------

int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  if (numel_ == 0) return true;  // no element to be out of place (as in PyTorch)
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  EMBER_CHECK(defined(), ValueError, "the tensor is undefined (default-constructed): it has no data");
  EMBER_CHECK(!device_.is_meta(), ValueError, "a meta tensor has a shape but no data; run on cpu or cuda instead");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

// ---- views ------------------------------------------------------------------------------------

Tensor Tensor::select(int64_t d, int64_t index) const {
  int64_t w = wrap_dim(d, dim(), "select");
  int64_t size = shape_[w];
  EMBER_CHECK(index >= -size && index < size, ShapeError, "select(): index ", index, " is out of range for dim ", w,
              " of size ", size);
  Tensor out = *this;
  out.offset_ += (index < 0 ? index + size : index) * strides_[w];
  out.shape_.erase(out.shape_.begin() + w);
  out.strides_.erase(out.strides_.begin() + w);
  out.numel_ = shape_numel(out.shape_);
  return out;
}

Tensor Tensor::view(const Shape& shape) const {
  EMBER_CHECK(is_contiguous(), ShapeError, "view(", shape_str(shape), ") needs a contiguous tensor, but this one (shape ",
              shape_str(shape_), ") is a strided view; use reshape() or contiguous() first");
  Shape resolved = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      EMBER_CHECK(infer < 0, ShapeError, "view(", shape_str(shape), "): only one size may be -1");
      infer = static_cast<int64_t>(i);
    } else {
      EMBER_CHECK(resolved[i] >= 0, ShapeError, "view(", shape_str(shape), "): sizes must be >= 0 or -1");
      known *= resolved[i];
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known != 0 && numel_ % known == 0, ShapeError, "view(", shape_str(shape), "): cannot infer the -1 size for ",
                numel_, " elements");
    resolved[infer] = numel_ / known;
  }
  EMBER_CHECK(shape_numel(resolved) == numel_, ShapeError, "view(", shape_str(shape), ") has ", shape_numel(resolved),
              " elements, but the tensor of shape ", shape_str(shape_), " has ", numel_);
  return Tensor(storage_, resolved, contiguous_strides(resolved), offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const { return is_contiguous() ? view(shape) : contiguous().view(shape); }

Tensor Tensor::flatten(int64_t start_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten");
  Shape shape(shape_.begin(), shape_.begin() + s);
  shape.push_back(-1);
  if (numel_ == 0) shape.back() = 0;
  return reshape(shape);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  int64_t a = wrap_dim(dim0, dim(), "transpose"), b = wrap_dim(dim1, dim(), "transpose");
  Tensor out = *this;
  std::swap(out.shape_[a], out.shape_[b]);
  std::swap(out.strides_[a], out.strides_[b]);
  return out;
}

Tensor Tensor::t() const {
  EMBER_CHECK(dim() == 2, ShapeError, "t() expects a 2-d tensor, but got shape ", shape_str(shape_));
  return transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  int64_t w = wrap_dim(d, dim(), "slice");
  EMBER_CHECK(step > 0, ValueError, "slice(): step must be positive, got ", step);
  int64_t size = shape_[w];
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Tensor out = *this;
  out.offset_ += start * strides_[w];
  out.shape_[w] = (end - start + step - 1) / step;
  out.strides_[w] *= step;
  out.numel_ = shape_numel(out.shape_);
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  EMBER_CHECK(dim() <= k::kMaxDims, ShapeError, "contiguous(): tensors of more than ", k::kMaxDims, " dims are not supported");
  Tensor out = empty(shape_, dtype_, device_);
  k::StridedLayout layout;
  layout.ndim = static_cast<int>(dim());
  for (int i = 0; i < layout.ndim; ++i) layout.sizes[i] = shape_[i], layout.strides[i] = strides_[i];
  visit_dtype(dtype_, [&](auto zero) {
    using T = decltype(zero);
    switch (device_.type) {
      case DeviceType::CPU: k::cpu::strided_copy<T>(data<T>(), layout, out.data<T>(), numel_); break;
      case DeviceType::CUDA:
        EMBER_CUDA_CALL(k::cuda::strided_copy<T>(data<T>(), layout, out.data<T>(), numel_, detail::stream_of(device_)));
        break;
      case DeviceType::Meta: break;
    }
  });
  return out;
}

Tensor Tensor::clone() const {
  Tensor src = contiguous();
  if (src.storage_ != storage_) return src;  // contiguous() already copied
  Tensor out = empty(shape_, dtype_, device_);
  if (!device_.is_meta()) out.copy_from(*this);
  return out;
}

// ---- placement --------------------------------------------------------------------------------

Tensor Tensor::to(Device device, bool non_blocking) const {
  EMBER_CHECK(defined(), ValueError, "to(", device.str(), ") called on an undefined tensor");
  if (device == device_) return *this;
  if (device.is_meta()) return Tensor(Storage::allocate(nbytes(), device), shape_, contiguous_strides(shape_), 0, dtype_);
  EMBER_CHECK(!device_.is_meta(), ValueError, "cannot move a meta tensor to ", device.str(),
              ": it has no data. Create the tensor on ", device.str(), " instead.");
  // A non-blocking copy to the host lands in pinned memory, which is what makes it asynchronous.
  bool pinned_dst = non_blocking && device.is_cpu() && device_.is_cuda();
  Tensor out = empty(shape_, dtype_, device, pinned_dst);
  out.copy_from(*this, non_blocking);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape_, dtype, device_);
  visit_dtype(dtype_, [&](auto src_zero) {
    visit_dtype(dtype, [&](auto dst_zero) {
      using S = decltype(src_zero);
      using D = decltype(dst_zero);
      switch (device_.type) {
        case DeviceType::CPU: k::cpu::cast<S, D>(src.data<S>(), out.data<D>(), numel_, 1.0); break;
        case DeviceType::CUDA:
          EMBER_CUDA_CALL(k::cuda::cast<S, D>(src.data<S>(), out.data<D>(), numel_, 1.0, detail::stream_of(device_)));
          break;
        case DeviceType::Meta: break;
      }
    });
  });
  return out;
}

Tensor Tensor::pin_memory() const {
  EMBER_CHECK(device_.is_cpu(), ValueError, "pin_memory() needs a cpu tensor, but this one is on ", device_.str(),
              "; pinned memory is page-locked host memory");
  if (is_pinned()) return *this;
  Tensor out = empty(shape_, dtype_, device_, /*pinned=*/true);
  out.copy_from(*this);
  return out;
}

Tensor& Tensor::copy_from(const Tensor& src, bool non_blocking) {
  EMBER_CHECK(defined() && src.defined(), ValueError, "copy_from(): both tensors must be defined");
  EMBER_CHECK(shape_ == src.shape_, ShapeError, "copy_from(): destination has shape ", shape_str(shape_),
              " but source has shape ", shape_str(src.shape_));
  EMBER_CHECK(dtype_ == src.dtype_, DTypeError, "copy_from(): destination is ", dtype_name(dtype_), " but source is ",
              dtype_name(src.dtype_), "; convert the source first with .to(", dtype_name(dtype_), ")");
  EMBER_CHECK(is_contiguous(), ValueError, "copy_from(): the destination must be contiguous (it is a strided view)");
  if (device_.is_meta()) return *this;
  Tensor from = src.contiguous();
  transfer({raw_data(), device_, is_pinned()}, {from.raw_data(), from.device_, from.is_pinned()}, nbytes(),
           non_blocking, "copy_from");
  return *this;
}

void Tensor::copy_to_host(void* dst) const {
  Tensor from = contiguous();
  transfer({dst, Device::cpu(), false}, {from.raw_data(), from.device_, from.is_pinned()}, nbytes(), false,
           "to_vector");
  if (device_.is_cuda()) detail::raise_deferred_errors(device_);
}

double Tensor::item_as_double() const {
  return visit_dtype(dtype_, [&](auto zero) { return static_cast<double>(item<decltype(zero)>()); });
}

// ---- printing ---------------------------------------------------------------------------------

namespace {

// Prints like PyTorch: nested brackets, at most 3 leading and 3 trailing entries per dim for
// large tensors, 4 decimals for floats.
void print_values(std::ostream& out, const std::vector<double>& v, const Shape& shape, const Shape& strides,
                  int64_t base, size_t d, bool floating, bool summarize, int indent) {
  if (d == shape.size()) {
    double x = v[base];
    if (floating) out << std::fixed << std::setprecision(4) << x;
    else out << static_cast<int64_t>(x);
    return;
  }
  out << '[';
  int64_t n = shape[d];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 6 && i == 3) {
      out << "...";
      i = n - 3;
      out << (d + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
    }
    print_values(out, v, shape, strides, base + i * strides[d], d + 1, floating, summarize, indent + 1);
    if (i + 1 < n) out << (d + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  out << ']';
}

}  // namespace

std::string Tensor::str() const {
  std::ostringstream out;
  if (!defined()) return "tensor(undefined)";
  out << "tensor(";
  if (device_.is_meta()) {
    out << "...";
  } else {
    Tensor host = contiguous().to(Device::cpu());
    std::vector<double> values(static_cast<size_t>(numel_));
    visit_dtype(dtype_, [&](auto zero) {
      using T = decltype(zero);
      const T* p = host.data<T>();
      for (int64_t i = 0; i < numel_; ++i) values[i] = static_cast<double>(p[i]);
    });
    print_values(out, values, shape_, contiguous_strides(shape_), 0, 0, is_floating(dtype_), numel_ > 1000, 7);
  }
  out << ", shape=" << shape_str(shape_) << ", dtype=" << dtype_name(dtype_) << ", device=" << device_.str() << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace ember
