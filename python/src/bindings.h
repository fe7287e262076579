// The pieces of ember._C, one init function per idea (python/src/<idea>.cpp), and the conversions they share.
// The bindings translate between Python and ember's C++ API and add no logic of their own.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace py = pybind11;

namespace ember::python {

void init_errors(py::module_& m);     // errors.cpp: ember's error types as Python exceptions
void init_tensor(py::module_& m);     // tensor.cpp: device, dtype, Tensor and its factories
void init_tensor_ops(py::module_& m); // tensor_ops.cpp: operators and the ops of core/ops
void init_dlpack(py::module_& m);     // dlpack.cpp: __dlpack__, __dlpack_device__, from_dlpack
void init_nn(py::module_& m);         // nn.cpp: ember._C.nn, modules and losses
void init_nn_transformer(py::module_& nn);  // nn_transformer.cpp: LayerNorm, GELU, attention, encoder layers
void init_optim(py::module_& m);      // optim.cpp: ember._C.optim, SGD, AdamW, schedules
void init_data_io(py::module_& m);    // data_io.cpp: ember._C.data (Fashion-MNIST, DataLoader), save/load

// The Tensor class as registered by init_tensor, for the files that add methods to it.
inline py::class_<Tensor> tensor_class(py::module_& m) {
  return py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
}

// None, "cpu", "cuda:1" or an ember.device -> Device (None: `fallback`).
Device to_device(const py::handle& obj, Device fallback = Device::cpu());
// None or an ember dtype -> DType (None: `fallback`).
DType to_dtype(const py::handle& obj, DType fallback = DType::F32);
// An undefined Tensor as None, else the Tensor.
py::object tensor_or_none(const Tensor& t);

}  // namespace ember::python
