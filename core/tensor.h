// Tensor: a cheap handle (shared storage + shape, strides, offset, dtype, device) with factories,
// views and explicit copies between host and device memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "base/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace ember {

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor: defined() is false

  // ---- factories ---------------------------------------------------------------------------
  // Uninitialised memory; `pinned` allocates page-locked host memory (cpu only).
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu(),
                      bool pinned = false);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32, Device device = Device::cpu());
  // [start, end) in steps of `step`, as a 1-d tensor.
  static Tensor arange(double start, double end, double step = 1, DType dtype = DType::F32,
                       Device device = Device::cpu());
  static Tensor arange(int64_t end, DType dtype = DType::F32, Device device = Device::cpu()) {
    return arange(0, static_cast<double>(end), 1, dtype, device);
  }
  // Copies `count` elements of `dtype` from host memory.
  static Tensor from_data(const void* data, int64_t count, const Shape& shape, DType dtype,
                          Device device = Device::cpu());
  template <typename T>
  static Tensor from_vector(const std::vector<T>& data, const Shape& shape, Device device = Device::cpu()) {
    return from_data(data.data(), static_cast<int64_t>(data.size()), shape, dtype_of<T>(), device);
  }
  // A tensor over memory ember did not allocate (no copy), like torch::from_blob: element i of the view is at
  // data + sum(i_d * strides[d]) elements. Strides must be non-negative (empty: contiguous); `deleter` runs once
  // when the last tensor over the memory dies (Storage::wrap). DLPack's consumer (python/) is the user.
  static Tensor from_blob(void* data, const Shape& shape, const Shape& strides, DType dtype, Device device,
                          std::function<void()> deleter);
  // Uniform [low, high) and normal(mean, std) from ember's counter-based generator: the same
  // seed gives the same values on cpu and cuda. `offset` skips that many values of the stream.
  static Tensor rand(const Shape& shape, uint64_t seed, DType dtype = DType::F32, Device device = Device::cpu(),
                     double low = 0, double high = 1, uint64_t offset = 0);
  static Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::F32, Device device = Device::cpu(),
                      double mean = 0, double std = 1, uint64_t offset = 0);

  // ---- properties --------------------------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_contiguous() const;
  bool is_pinned() const { return storage_ && storage_->is_pinned(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Address of the first element (a device address for cuda tensors). Throws on meta tensors.
  void* raw_data() const;
  template <typename T>
  T* data() const {
    EMBER_CHECK(dtype_ == dtype_of<T>(), DTypeError, "data<", dtype_name(dtype_of<T>()), ">() called on a ",
                dtype_name(dtype_), " tensor");
    return static_cast<T*>(raw_data());
  }

  // ---- views (share storage) and copies -------------------------------------------------------
  Tensor view(const Shape& shape) const;     // needs a contiguous tensor; one size may be -1
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a contiguous copy
  Tensor flatten(int64_t start_dim = 0) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // transpose of a 2-d tensor
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // the view at `index` of `dim`, without that dim
  Tensor contiguous() const;  // itself when already contiguous
  Tensor clone() const;       // a contiguous copy on the same device

  // ---- placement ----------------------------------------------------------------------------
  // Itself when already on `device`; else a copy over PCIe. non_blocking from pinned memory is a
  // cudaMemcpyAsync on the device's stream; to cpu it lands in pinned memory (synchronise before
  // reading it on the host: cuda::synchronize()).
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(DType dtype) const;  // a cast on the same device
  Tensor pin_memory() const;     // a pinned copy of a cpu tensor (itself if already pinned)
  // Copies src's values into this tensor (same shape and dtype, any devices). Returns *this.
  Tensor& copy_from(const Tensor& src, bool non_blocking = false);

  // Values on the host, in row-major order (a synchronising D2H copy for cuda tensors).
  template <typename T>
  std::vector<T> to_vector() const {
    EMBER_CHECK(dtype_ == dtype_of<T>(), DTypeError, "to_vector<", dtype_name(dtype_of<T>()), ">() called on a ",
                dtype_name(dtype_), " tensor; convert it first with .to(", dtype_name(dtype_of<T>()), ")");
    std::vector<T> out(static_cast<size_t>(numel_));
    copy_to_host(out.data());
    return out;
  }
  template <typename T>
  T item() const {
    EMBER_CHECK(numel_ == 1, ShapeError, "item() needs a tensor with one element, got shape ", shape_str(shape_));
    return to_vector<T>()[0];
  }
  double item_as_double() const;  // item() of any dtype, converted

  std::string str() const;  // like PyTorch: values, then shape, dtype and device

 private:
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);
  void copy_to_host(void* dst) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;  // in elements
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
  Device device_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

}  // namespace ember
