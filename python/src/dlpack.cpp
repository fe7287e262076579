// DLPack both ways, zero-copy (dlpack/dlpack.h v0.6, the legacy "dltensor" capsule that PyTorch 1.13 and NumPy 1.24
// speak). Export: Tensor.__dlpack__ hands out a DLManagedTensor whose context holds a Tensor (so the storage lives
// while any consumer holds it) and its shape and strides; its deleter frees that context and does no Python work.
// Import: ember.from_dlpack consumes a capsule (renamed "used_dltensor") into a tensor over the producer's memory,
// whose storage calls the producer's deleter when it dies. What ember cannot hold as it is (bool, bfloat16,
// float16, complex, negative strides, read-only arrays, other devices) is refused, never copied.
#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "python/src/bindings.h"

namespace ember::python {
namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

[[noreturn]] void buffer_error(const std::string& message) {
  PyErr_SetString(PyExc_BufferError, message.c_str());
  throw py::error_already_set();
}

// ---- export -----------------------------------------------------------------------------------

struct ExportContext {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

void delete_export(DLManagedTensor* managed) { delete static_cast<ExportContext*>(managed->manager_ctx); }

// An unconsumed capsule that dies frees its tensor; a consumed one belongs to its consumer.
void capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::F32: return {kDLFloat, 32, 1};
    case DType::F64: return {kDLFloat, 64, 1};
    case DType::I32: return {kDLInt, 32, 1};
    case DType::I64: return {kDLInt, 64, 1};
    case DType::U8: return {kDLUInt, 8, 1};
  }
  throw InternalError("dl_dtype: unknown dtype");
}

DLDevice dl_device(Device d) {
  if (d.is_cuda()) return {kDLCUDA, d.index};
  if (d.is_cpu()) return {kDLCPU, 0};
  buffer_error("a meta tensor has no memory to share through DLPack; make it on cpu or cuda");
}

// CPU exchange takes stream=None. For a CUDA tensor the consumer names the stream it will use (None: the legacy
// default stream, -1: no synchronisation): ember's queued work on the tensor is finished before it is handed out.
void prepare_stream(const Tensor& t, const py::object& stream) {
  if (t.device().is_cpu()) {
    if (!stream.is_none())
      buffer_error("__dlpack__: a cpu tensor takes stream=None, got stream=" + py::repr(stream).cast<std::string>());
    return;
  }
  if (!stream.is_none() && stream.cast<int64_t>() == -1) return;
  cuda::synchronize(t.device());
}

py::object to_dlpack(const Tensor& tensor, const py::object& stream, const py::object& /*max_version*/,
                     const py::object& device, const py::object& copy) {
  DLDevice here = dl_device(tensor.device());
  if (!device.is_none()) {
    auto wanted = device.cast<std::pair<int, int>>();
    if (wanted.first != static_cast<int>(here.device_type) || wanted.second != here.device_id)
      buffer_error("__dlpack__: the tensor is on " + tensor.device().str() +
                   "; move it to the device you want with .to() first");
  }
  prepare_stream(tensor, stream);
  auto* ctx = new ExportContext{!copy.is_none() && copy.cast<bool>() ? tensor.clone() : tensor, {}, {}, {}};
  const Tensor& t = ctx->tensor;
  ctx->shape.assign(t.shape().begin(), t.shape().end());
  ctx->strides.assign(t.strides().begin(), t.strides().end());
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = t.raw_data();
  dl.device = here;
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = dl_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = &delete_export;
  PyObject* capsule = PyCapsule_New(&ctx->managed, kCapsuleName, &capsule_destructor);
  if (capsule == nullptr) {
    delete ctx;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

py::tuple dlpack_device(const Tensor& t) {
  DLDevice d = dl_device(t.device());
  return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
}

// ---- import -----------------------------------------------------------------------------------

DType ember_dtype(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) return DType::F32;
    if (t.code == kDLFloat && t.bits == 64) return DType::F64;
    if (t.code == kDLInt && t.bits == 32) return DType::I32;
    if (t.code == kDLInt && t.bits == 64) return DType::I64;
    if (t.code == kDLUInt && t.bits == 8) return DType::U8;
  }
  static const char* codes[] = {"int", "uint", "float", "opaque handle", "bfloat", "complex", "bool"};
  std::string name = (t.code < 7 ? codes[t.code] : "code " + std::to_string(t.code)) + std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  throw py::type_error("from_dlpack: ember has no dtype for DLPack's " + name +
                       " (it takes float32, float64, int32, int64, uint8); convert it first, e.g. x.float()");
}

Device ember_device(DLDevice d) {
  if (d.device_type == kDLCPU || d.device_type == kDLCUDAHost) return Device::cpu();
  if (d.device_type == kDLCUDA) return Device::cuda(d.device_id);
  buffer_error("from_dlpack: ember takes cpu and cuda memory only, not DLPack device type " +
               std::to_string(static_cast<int>(d.device_type)));
}

// Refusals that the capsule cannot show: a read-only array, and a bool tensor (PyTorch 1.13 exports bool as uint8).
void check_producer(const py::handle& obj) {
  if (py::hasattr(obj, "flags") && py::hasattr(obj.attr("flags"), "writeable") &&
      !obj.attr("flags").attr("writeable").cast<bool>())
    buffer_error("from_dlpack: the array is read-only, and a tensor over it could write to it; pass a writeable "
                 "copy (a.copy())");
  if (py::hasattr(obj, "dtype")) {
    std::string name = py::str(obj.attr("dtype")).cast<std::string>();
    if (name == "bool" || name == "torch.bool")
      throw py::type_error("from_dlpack: ember has no bool dtype; convert it first, e.g. x.to(torch.uint8) or "
                           "a.astype(numpy.uint8)");
  }
}

// The consumer's stream for a CUDA producer: ember's compute stream (1, the legacy default stream, when it is that).
py::object consumer_stream(Device d) {
  auto stream = reinterpret_cast<intptr_t>(detail::stream_of(d));
  return py::int_(stream == 0 ? 1 : stream);
}

py::object capsule_of(const py::object& obj) {
  if (PyCapsule_CheckExact(obj.ptr())) return obj;
  if (!py::hasattr(obj, "__dlpack__"))
    throw py::type_error("from_dlpack expects an object with __dlpack__ (torch.Tensor, numpy.ndarray, "
                         "ember.Tensor) or a DLPack capsule, got " + py::str(py::type::of(obj)).cast<std::string>());
  check_producer(obj);
  if (py::hasattr(obj, "__dlpack_device__")) {
    auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int, int>>();
    if (dev.first == kDLCUDA) return obj.attr("__dlpack__")(py::arg("stream") = consumer_stream(Device::cuda(dev.second)));
  }
  return obj.attr("__dlpack__")();
}

Tensor from_dlpack(const py::object& obj) {
  py::object capsule = capsule_of(obj);
  PyObject* cap = capsule.ptr();
  if (PyCapsule_IsValid(cap, kUsedCapsuleName))
    buffer_error("from_dlpack: this DLPack capsule was already consumed (each can be consumed once); ask the "
                 "producer for a new one, e.g. ember.from_dlpack(x) rather than a saved x.__dlpack__()");
  if (!PyCapsule_IsValid(cap, kCapsuleName)) {
    PyErr_Clear();
    const char* name = PyCapsule_GetName(cap);
    PyErr_Clear();
    throw py::type_error(std::string("from_dlpack: not a legacy DLPack capsule (its name is \"") +
                         (name ? name : "") + "\", not \"dltensor\")");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kCapsuleName));
  const DLTensor& dl = managed->dl_tensor;
  DType dtype = ember_dtype(dl.dtype);
  Device device = ember_device(dl.device);
  Shape shape(dl.shape, dl.shape + dl.ndim), strides;
  if (dl.strides != nullptr) strides.assign(dl.strides, dl.strides + dl.ndim);
  for (int64_t s : strides)
    if (s < 0)
      buffer_error("from_dlpack: negative strides are not supported; pass a copy with positive strides (e.g. "
                   "numpy.ascontiguousarray(a) or x.contiguous())");
  char* data = static_cast<char*>(dl.data) + dl.byte_offset;
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) != 0)
    buffer_error("from_dlpack: the data is not aligned to its element size; pass an aligned copy");
  Tensor t = Tensor::from_blob(data, shape, strides, dtype, device, [managed] {
    if (managed->deleter != nullptr) managed->deleter(managed);
  });
  PyCapsule_SetName(cap, kUsedCapsuleName);  // ember's storage now owns the producer's tensor
  return t;
}

}  // namespace

void init_dlpack(py::module_& m) {
  tensor_class(m)
      .def("__dlpack__", &to_dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
           "A DLPack capsule over this tensor's memory (legacy \"dltensor\"; max_version is accepted and answered "
           "with the legacy capsule)")
      .def("__dlpack_device__", &dlpack_device);
  m.def("from_dlpack", &from_dlpack, py::arg("ext_tensor"),
        "A tensor sharing the memory of any object with __dlpack__ (torch.Tensor, numpy.ndarray) or of a capsule");
}

}  // namespace ember::python
