// ember.device, the dtypes, ember.Tensor (properties, views, placement, NumPy and Python values) and the factories.
#include <pybind11/numpy.h>

#include <string>

#include "core/generator.h"
#include "core/ops.h"
#include "python/src/bindings.h"

namespace ember::python {

Device to_device(const py::handle& obj, Device fallback) {
  if (obj.is_none()) return fallback;
  if (py::isinstance<py::str>(obj)) return Device::parse(obj.cast<std::string>());
  if (py::isinstance<Device>(obj)) return obj.cast<Device>();
  throw py::type_error("expected a device: ember.device, a string such as \"cpu\" or \"cuda:0\", or None; got " +
                       py::repr(obj).cast<std::string>());
}

DType to_dtype(const py::handle& obj, DType fallback) {
  if (obj.is_none()) return fallback;
  if (py::isinstance<DType>(obj)) return obj.cast<DType>();
  throw py::type_error("expected an ember dtype (ember.float32, ember.int64, ...), got " +
                       py::repr(obj).cast<std::string>());
}

py::object tensor_or_none(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

namespace {

py::tuple to_tuple(const Shape& s) {
  py::tuple out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = s[i];
  return out;
}

// "float32" -> NumPy's dtype of the same name.
py::dtype numpy_dtype(DType t) { return py::dtype(dtype_name(t)); }

DType dtype_of_numpy(const py::dtype& d) {
  const std::string name = py::str(static_cast<const py::handle&>(d)).cast<std::string>();
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8})
    if (name == dtype_name(t)) return t;
  throw py::type_error("ember has no dtype for NumPy's " + name +
                       " (it has float32, float64, int32, int64, uint8); convert the array first, e.g. "
                       "a.astype(numpy.float32)");
}

// A NumPy array over the tensor's memory (host tensors only), keeping the storage alive, like torch's .numpy().
py::array to_numpy(const Tensor& t) {
  EMBER_CHECK(t.device().is_cpu(), ValueError, "numpy() needs a cpu tensor, but this one is on ", t.device().str(),
              "; copy it to the host first with .cpu() or .to(\"cpu\")");
  const auto item = static_cast<int64_t>(dtype_size(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(s * item);
  auto* owner = new Tensor(t);
  py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  void* data = t.numel() > 0 ? t.raw_data() : nullptr;
  return py::array(numpy_dtype(t.dtype()), shape, strides, data, base);
}

// A copy of a NumPy array (any layout) as a tensor on `device`.
Tensor from_numpy_copy(const py::array& arr, const py::handle& device) {
  DType dtype = dtype_of_numpy(arr.dtype());
  auto contiguous = py::array::ensure(arr, py::array::c_style);
  Shape shape(contiguous.shape(), contiguous.shape() + contiguous.ndim());
  return Tensor::from_data(contiguous.data(), static_cast<int64_t>(contiguous.size()), shape, dtype,
                           to_device(device));
}

py::object item(const Tensor& t) {
  if (is_floating(t.dtype())) return py::float_(t.item_as_double());
  if (t.dtype() == DType::I64) return py::int_(t.item<int64_t>());  // exact beyond 2^53, where a double is not
  return py::int_(static_cast<int64_t>(t.item_as_double()));
}

// t[i], t[a:b:c] and tuples of them: views (select and slice), as in PyTorch.
Tensor index(const Tensor& t, const py::object& key) {
  py::tuple keys = py::isinstance<py::tuple>(key) ? key.cast<py::tuple>() : py::make_tuple(key);
  EMBER_CHECK(static_cast<int64_t>(keys.size()) <= t.dim(), ShapeError, "too many indices (", keys.size(),
              ") for a tensor of ", t.dim(), " dims");
  Tensor out = t;
  int64_t d = 0;
  for (const py::handle k : keys) {
    if (py::isinstance<py::slice>(k)) {
      py::ssize_t start, stop, step, length;
      if (!k.cast<py::slice>().compute(out.size(d), &start, &stop, &step, &length)) throw py::error_already_set();
      EMBER_CHECK(step > 0, ValueError, "negative or zero slice steps are not supported (got ", step, ")");
      out = out.slice(d++, start, stop, step);
    } else if (py::isinstance<py::int_>(k)) {
      out = out.select(d, k.cast<int64_t>());
    } else {
      throw py::type_error("tensor indices must be integers or slices, got " + py::repr(k).cast<std::string>());
    }
  }
  return out;
}

// randn/rand from the default generator, as nn's initialisation draws: a reserved range of its stream.
Tensor random(const Shape& shape, bool normal, DType dtype, Device device) {
  Generator& g = default_generator();
  uint64_t offset = g.reserve(static_cast<uint64_t>(shape_numel(shape)));
  return normal ? Tensor::randn(shape, g.seed(), dtype, device, 0, 1, offset)
                : Tensor::rand(shape, g.seed(), dtype, device, 0, 1, offset);
}

void init_device(py::module_& m) {
  py::class_<Device>(m, "device", "Where a tensor lives: ember.device(\"cpu\"), ember.device(\"cuda:0\")")
      .def(py::init([](const std::string& text) { return Device::parse(text); }), py::arg("type"))
      .def(py::init([](const std::string& type, int index) { return Device::parse(type + ":" + std::to_string(index)); }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type", [](Device d) { return d.is_cuda() ? "cuda" : d.is_meta() ? "meta" : "cpu"; })
      .def_property_readonly("index", [](Device d) { return d.is_cuda() ? py::object(py::int_(d.index)) : py::none(); })
      .def("__str__", &Device::str)
      .def("__repr__", [](Device d) {
        return d.is_cuda() ? "device(type='cuda', index=" + std::to_string(d.index) + ")"
                           : "device(type='" + d.str() + "')";
      })
      .def("__eq__", [](Device a, const py::object& b) {
        return (py::isinstance<Device>(b) || py::isinstance<py::str>(b)) && a == to_device(b);
      })
      .def("__hash__", [](Device d) { return static_cast<int>(d.type) * 1024 + d.index; });
  py::implicitly_convertible<py::str, Device>();

  py::module_ cuda = m.def_submodule("cuda", "CUDA devices: ember.cuda.is_available(), device_count(), ...");
  cuda.def("is_available", &cuda::is_available);
  cuda.def("device_count", &cuda::device_count);
  cuda.def("is_emulated", &cuda::is_emulated, "True when cuda:N is ember's emulated device (no GPU)");
  cuda.def("unavailable_reason", &cuda::unavailable_reason);
  cuda.def("get_device_name", [](int i) { return cuda::properties(i).name; }, py::arg("device") = 0);
  cuda.def("synchronize", [](const py::object& d) { cuda::synchronize(to_device(d, Device::cuda())); },
           py::arg("device") = py::none());
}

void init_dtypes(py::module_& m) {
  py::enum_<DType> dtype(m, "dtype", "Element type of a tensor");
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8}) {
    dtype.value(dtype_name(t), t);
    m.attr(dtype_name(t)) = t;
  }
  // Replaced, not overloaded: py::enum_'s own __repr__ and __str__ would match first.
  auto name = [](DType t) { return std::string("ember.") + dtype_name(t); };
  dtype.attr("__repr__") = py::cpp_function(name, py::name("__repr__"), py::is_method(dtype));
  dtype.attr("__str__") = py::cpp_function(name, py::name("__str__"), py::is_method(dtype));
  dtype.def_property_readonly("is_floating_point", &is_floating);
  dtype.def_property_readonly("itemsize", &dtype_size);
  m.attr("float") = DType::F32, m.attr("double") = DType::F64, m.attr("int") = DType::I32;
  m.attr("long") = DType::I64;
}

void init_factories(py::module_& m) {
  m.def("_full", [](const Shape& s, double v, const py::object& dt, const py::object& dev) {
    return Tensor::full(s, v, to_dtype(dt), to_device(dev));
  }, py::arg("size"), py::arg("fill_value"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def("_empty", [](const Shape& s, const py::object& dt, const py::object& dev) {
    return Tensor::empty(s, to_dtype(dt), to_device(dev));
  }, py::arg("size"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def("_random", [](const Shape& s, bool normal, const py::object& dt, const py::object& dev) {
    return random(s, normal, to_dtype(dt), to_device(dev));
  }, py::arg("size"), py::arg("normal"), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  m.def("arange", [](double start, const py::object& end, double step, const py::object& dt, const py::object& dev) {
    if (end.is_none()) return Tensor::arange(0, start, step, to_dtype(dt), to_device(dev));
    return Tensor::arange(start, end.cast<double>(), step, to_dtype(dt), to_device(dev));
  }, py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(), py::arg("dtype") = py::none(),
     py::arg("device") = py::none());
  m.def("_from_numpy_copy", &from_numpy_copy, py::arg("array"), py::arg("device") = py::none());
  m.def("manual_seed", [](uint64_t seed) { manual_seed(seed); }, py::arg("seed"),
        "Seeds the default generator that layer initialisation, dropout, rand and randn draw from");
  m.def("initial_seed", [] { return default_generator().seed(); });
}

}  // namespace

void init_tensor(py::module_& m) {
  init_device(m);
  init_dtypes(m);
  py::class_<Tensor>(m, "Tensor", "A handle to a strided array on a device (views share storage)")
      .def_property_readonly("shape", [](const Tensor& t) { return to_tuple(t.shape()); })
      .def("size", [](const Tensor& t, const py::object& d) -> py::object {
        if (d.is_none()) return to_tuple(t.shape());
        return py::int_(t.size(d.cast<int64_t>()));
      }, py::arg("dim") = py::none())
      .def("stride", [](const Tensor& t) { return to_tuple(t.strides()); })
      .def("dim", &Tensor::dim)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("__len__", [](const Tensor& t) {
        EMBER_CHECK(t.dim() > 0, ShapeError, "len() of a 0-d tensor");
        return t.size(0);
      })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("is_cuda", [](const Tensor& t) { return t.device().is_cuda(); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("is_pinned", &Tensor::is_pinned)
      .def("storage_offset", &Tensor::offset)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.numel() ? t.raw_data() : nullptr); })
      .def("element_size", [](const Tensor& t) { return dtype_size(t.dtype()); })
      .def("view", [](const Tensor& t, const Shape& s) { return t.view(s); }, py::arg("shape"))
      .def("reshape", [](const Tensor& t, const Shape& s) { return t.reshape(s); }, py::arg("shape"))
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0)
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("t", &Tensor::t)
      .def_property_readonly("T", &Tensor::t)
      .def("slice", &Tensor::slice, py::arg("dim"), py::arg("start"), py::arg("end"), py::arg("step") = 1)
      .def("select", &Tensor::select, py::arg("dim"), py::arg("index"))
      .def("__getitem__", &index)
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def("to", [](const Tensor& t, const py::object& target, bool non_blocking) {
        if (py::isinstance<DType>(target)) return t.to(target.cast<DType>());
        return t.to(to_device(target), non_blocking);
      }, py::arg("device"), py::arg("non_blocking") = false,
         "A copy on `device` (an ember.device or a string) or converted to a dtype; itself when nothing changes")
      .def("cpu", [](const Tensor& t) { return t.to(Device::cpu()); })
      .def("cuda", [](const Tensor& t, int i) { return t.to(Device::cuda(i)); }, py::arg("device") = 0)
      .def("float", [](const Tensor& t) { return t.to(DType::F32); })
      .def("double", [](const Tensor& t) { return t.to(DType::F64); })
      .def("long", [](const Tensor& t) { return t.to(DType::I64); })
      .def("pin_memory", &Tensor::pin_memory)
      .def("copy_", [](Tensor& t, const Tensor& src, bool nb) { return t.copy_from(src, nb); }, py::arg("src"),
           py::arg("non_blocking") = false)
      .def("numpy", &to_numpy, "A NumPy array sharing this cpu tensor's memory")
      .def("item", &item)
      .def("tolist", [](const Tensor& t) { return to_numpy(t.to(Device::cpu())).attr("tolist")(); })
      .def("__repr__", &Tensor::str);
  init_factories(m);
}

}  // namespace ember::python
