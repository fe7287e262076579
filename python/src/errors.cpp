// ember's error types (base/error.h) as Python exceptions. Each subclasses ember.Error (a RuntimeError) and, where
// Python has a matching built-in, that one too: a ShapeError is caught by `except ValueError`, a DTypeError by
// `except TypeError`, an IoError by `except OSError`. The message is ember's, unchanged.
#include <exception>

#include "base/error.h"
#include "python/src/bindings.h"

namespace ember::python {
namespace {

struct PyErrors {
  PyObject *error, *device_mismatch, *shape, *dtype, *value, *out_of_memory, *cuda, *device_unavailable, *io,
      *format, *numerical, *internal;
};
PyErrors errors;  // the classes live as long as the module (held by its dict too)

// A new exception class ember.<name> with the given bases, added to `m`.
PyObject* make_error(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  std::string qualified = std::string("ember.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(cls));
  return cls;
}

py::tuple bases(PyObject* a, PyObject* b = nullptr) {
  return b ? py::make_tuple(py::handle(a), py::handle(b)) : py::make_tuple(py::handle(a));
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const DeviceMismatchError& e) {
    PyErr_SetString(errors.device_mismatch, e.what());
  } catch (const ShapeError& e) {
    PyErr_SetString(errors.shape, e.what());
  } catch (const DTypeError& e) {
    PyErr_SetString(errors.dtype, e.what());
  } catch (const ValueError& e) {
    PyErr_SetString(errors.value, e.what());
  } catch (const OutOfMemoryError& e) {
    PyErr_SetString(errors.out_of_memory, e.what());
  } catch (const CudaError& e) {
    PyErr_SetString(errors.cuda, e.what());
  } catch (const DeviceUnavailableError& e) {
    PyErr_SetString(errors.device_unavailable, e.what());
  } catch (const IoError& e) {
    PyErr_SetString(errors.io, e.what());
  } catch (const FormatError& e) {
    PyErr_SetString(errors.format, e.what());
  } catch (const NumericalError& e) {
    PyErr_SetString(errors.numerical, e.what());
  } catch (const InternalError& e) {
    PyErr_SetString(errors.internal, e.what());
  } catch (const Error& e) {
    PyErr_SetString(errors.error, e.what());
  }
}

}  // namespace

void init_errors(py::module_& m) {
  PyErrors& e = errors;
  e.error = make_error(m, "Error", bases(PyExc_RuntimeError), "Base of every error ember raises.");
  e.device_mismatch = make_error(m, "DeviceMismatchError", bases(e.error),
                                 "Tensors (or a module and its input) on different devices.");
  e.shape = make_error(m, "ShapeError", bases(e.error, PyExc_ValueError), "A shape an op cannot take.");
  e.dtype = make_error(m, "DTypeError", bases(e.error, PyExc_TypeError), "A dtype an op cannot take.");
  e.value = make_error(m, "InvalidValueError", bases(e.error, PyExc_ValueError), "A bad argument value.");
  e.out_of_memory = make_error(m, "OutOfMemoryError", bases(e.error, PyExc_MemoryError), "Out of host or GPU memory.");
  e.cuda = make_error(m, "CudaError", bases(e.error), "An error of the CUDA runtime.");
  e.device_unavailable = make_error(m, "DeviceUnavailableError", bases(e.error),
                                    "CUDA was asked for, but no usable GPU exists.");
  e.io = make_error(m, "IoError", bases(e.error, PyExc_OSError), "A file that cannot be read or written.");
  e.format = make_error(m, "FormatError", bases(e.error, PyExc_ValueError), "A malformed file.");
  e.numerical = make_error(m, "NumericalError", bases(e.error, PyExc_ArithmeticError), "NaN or Inf where numbers must be finite.");
  e.internal = make_error(m, "InternalError", bases(e.error), "A broken invariant: a bug in ember.");
  py::register_exception_translator(&translate);
}

}  // namespace ember::python
