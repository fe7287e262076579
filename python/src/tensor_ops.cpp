// Tensor operators and the ops of core/ops/ under PyTorch's names: ember.matmul, ember.relu, Tensor.sum, ...
#include "core/ops.h"
#include "python/src/bindings.h"

namespace ember::python {
namespace {

void init_operators(py::class_<Tensor>& cls) {
  cls.def("__add__", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); }, py::is_operator())
      .def("__sub__", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); }, py::is_operator())
      .def("__mul__", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); }, py::is_operator())
      .def("__mul__", [](const Tensor& a, double s) { return ops::scale(a, s); }, py::is_operator())
      .def("__rmul__", [](const Tensor& a, double s) { return ops::scale(a, s); }, py::is_operator())
      .def("__truediv__", [](const Tensor& a, double s) { return ops::scale(a, 1.0 / s); }, py::is_operator())
      .def("__neg__", [](const Tensor& a) { return ops::scale(a, -1); })
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }, py::is_operator())
      .def("__iadd__", [](Tensor& a, const Tensor& b) { ops::add_(a, b); return a; }, py::is_operator())
      .def("__isub__", [](Tensor& a, const Tensor& b) { ops::add_(a, b, -1); return a; }, py::is_operator())
      .def("add_", [](Tensor& a, const Tensor& b, double alpha) { ops::add_(a, b, alpha); return a; },
           py::arg("other"), py::kw_only(), py::arg("alpha") = 1)
      .def("fill_", [](Tensor& a, double v) { ops::fill_(a, v); return a; }, py::arg("value"))
      .def("zero_", [](Tensor& a) { ops::fill_(a, 0); return a; });
}

void init_methods(py::class_<Tensor>& cls) {
  cls.def("add", &ops::add, py::arg("other"))
      .def("sub", &ops::sub, py::arg("other"))
      .def("mul", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); }, py::arg("other"))
      .def("matmul", [](const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }, py::arg("other"))
      .def("relu", &ops::relu)
      .def("sum", &ops::sum)
      .def("mean", &ops::mean)
      .def("argmax", &ops::argmax, "Index of the largest value along the last dim of a 2-d tensor")
      .def("softmax", [](const Tensor& x, int64_t dim) {
        EMBER_CHECK(dim == -1 || dim == x.dim() - 1, ValueError, "softmax: ember takes the last dim only (dim=-1)");
        return ops::softmax(x);
      }, py::arg("dim") = -1)
      .def("log_softmax", [](const Tensor& x, int64_t dim) {
        EMBER_CHECK(dim == -1 || dim == x.dim() - 1, ValueError, "log_softmax: ember takes the last dim only (dim=-1)");
        return ops::log_softmax(x);
      }, py::arg("dim") = -1);
}

void init_functions(py::module_& m) {
  m.def("add", &ops::add, py::arg("input"), py::arg("other"));
  m.def("sub", &ops::sub, py::arg("input"), py::arg("other"));
  m.def("mul", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); }, py::arg("input"), py::arg("other"));
  m.def("matmul", [](const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }, py::arg("input"),
        py::arg("other"));
  m.def("relu", &ops::relu, py::arg("input"));
  m.def("sum", &ops::sum, py::arg("input"));
  m.def("mean", &ops::mean, py::arg("input"));
  m.def("argmax", &ops::argmax, py::arg("input"));
  m.def("softmax", [](const Tensor& x) { return ops::softmax(x); }, py::arg("input"));
  m.def("log_softmax", [](const Tensor& x) { return ops::log_softmax(x); }, py::arg("input"));
  m.def("count_correct", &ops::count_correct, py::arg("logits"), py::arg("labels"),
        "Rows whose argmax equals the label, as a 0-d int64 tensor on the logits' device");
  m.def("cross_entropy", [](const Tensor& logits, const Tensor& labels) { return ops::cross_entropy(logits, labels).loss; },
        py::arg("input"), py::arg("target"));
  m.def("linear", [](const Tensor& x, const Tensor& w, const py::object& b) {
    return ops::linear(x, w, b.is_none() ? Tensor() : b.cast<Tensor>());
  }, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none());
}

}  // namespace

void init_tensor_ops(py::module_& m) {
  auto cls = tensor_class(m);
  init_operators(cls);
  init_methods(cls);
  init_functions(m);
}

}  // namespace ember::python
