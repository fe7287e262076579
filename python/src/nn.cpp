// ember._C.nn: Parameter, Module (forward, the explicit backward of nn/module.h's gradient contract, state_dict,
// placement, modes) and the modules and losses of nn/, under PyTorch's names and argument orders.
#include <pybind11/stl.h>

#include <optional>

#include "nn/nn.h"
#include "python/src/bindings.h"

namespace ember::python {
namespace {

using nn::Module;
using ModulePtr = std::shared_ptr<Module>;
template <typename M>
using ModuleClass = py::class_<M, Module, std::shared_ptr<M>>;

nn::Size2 to_size2(const py::handle& obj) {
  if (py::isinstance<py::int_>(obj)) return nn::Size2(obj.cast<int64_t>());
  auto pair = obj.cast<std::pair<int64_t, int64_t>>();
  return nn::Size2(pair.first, pair.second);
}

py::dict state_dict(const Module& m) {
  py::dict out;  // insertion-ordered: PyTorch's order
  for (auto& [name, tensor] : m.state_dict()) out[py::str(name)] = tensor;
  return out;
}

void load_state_dict(Module& m, const py::dict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto [name, value] : state) tensors.emplace_back(name.cast<std::string>(), value.cast<Tensor>());
  m.load_state_dict(tensors, strict);
}

// PyTorch's layout: "Sequential(\n  (0): Linear\n  (1): ReLU\n)".
std::string repr(const Module& m) {
  if (m.children().empty()) return m.type_name() + "()";
  std::string out = m.type_name() + "(\n";
  for (auto& [name, child] : m.children()) {
    std::string inner = repr(*child);
    for (size_t i = inner.find('\n'); i != std::string::npos; i = inner.find('\n', i + 1)) inner.insert(i + 1, "  ");
    out += "  (" + name + "): " + inner + "\n";
  }
  return out + ")";
}

void init_parameter(py::module_& nn) {
  py::class_<nn::Parameter, nn::ParameterPtr>(nn, "Parameter",
                                              "A trainable tensor (.data) and its gradient (.grad), shared by handle")
      .def(py::init([](const Tensor& t) { return std::make_shared<nn::Parameter>(nn::Parameter{t, Tensor()}); }),
           py::arg("data"))
      .def_property("data", [](const nn::Parameter& p) { return p.value; },
                    [](nn::Parameter& p, const Tensor& t) { p.value = t; })
      .def_property("grad", [](const nn::Parameter& p) { return tensor_or_none(p.grad); },
                    [](nn::Parameter& p, const py::object& g) { p.grad = g.is_none() ? Tensor() : g.cast<Tensor>(); })
      .def_property_readonly("shape", [](const nn::Parameter& p) { return py::tuple(py::cast(p.value.shape())); })
      .def_property_readonly("dtype", [](const nn::Parameter& p) { return p.value.dtype(); })
      .def_property_readonly("device", [](const nn::Parameter& p) { return p.value.device(); })
      .def("numel", [](const nn::Parameter& p) { return p.value.numel(); })
      .def("__repr__", [](const nn::Parameter& p) { return "Parameter containing:\n" + p.value.str(); });
}

void init_module(py::module_& nn) {
  py::class_<Module, ModulePtr>(nn, "Module", "Base of every layer: forward, explicit backward, parameters")
      .def("forward", &Module::forward, py::arg("input"))
      .def("__call__", &Module::operator(), py::arg("input"))
      .def("backward", [](Module& m, const Tensor& g) { return tensor_or_none(m.backward(g)); }, py::arg("grad_output"),
           "Returns the gradient w.r.t. the last forward's input and adds the parameters' gradients (nn/module.h)")
      .def("parameters", &Module::parameters)
      .def("named_parameters", &Module::named_parameters)
      .def("named_buffers", &Module::named_buffers)
      .def("children", [](const Module& m) {
        std::vector<ModulePtr> out;
        for (auto& [name, child] : m.children()) out.push_back(child);
        return out;
      })
      .def("named_children", &Module::children)
      .def("state_dict", &state_dict)
      .def("load_state_dict", &load_state_dict, py::arg("state_dict"), py::arg("strict") = true)
      .def("zero_grad", &Module::zero_grad)
      .def("train", [](py::object self, bool mode) { self.cast<Module&>().train(mode); return self; },
           py::arg("mode") = true)
      .def("eval", [](py::object self) { self.cast<Module&>().eval(); return self; })
      .def_property_readonly("training", &Module::is_training)
      .def_property("input_grad", &Module::input_grad, &Module::set_input_grad)
      .def("to", [](py::object self, const py::object& target) {
        if (py::isinstance<DType>(target)) self.cast<Module&>().to(target.cast<DType>());
        else self.cast<Module&>().to(to_device(target));
        return self;
      }, py::arg("device"), "Moves (or converts) parameters, gradients and buffers in place; returns the module")
      .def("cpu", [](py::object self) { self.cast<Module&>().to(Device::cpu()); return self; })
      .def("cuda", [](py::object self, int i) { self.cast<Module&>().to(Device::cuda(i)); return self; },
           py::arg("device") = 0)
      .def_property_readonly("device", &Module::device)
      .def("num_parameters", &Module::num_parameters)
      .def("__repr__", &repr);
}

void init_layers(py::module_& nn) {
  using dt = py::object;
  auto linear = [](int64_t in, int64_t out, bool bias, const dt& d, const dt& dev) {
    return std::make_shared<nn::Linear>(in, out, bias, to_dtype(d), to_device(dev));
  };
  ModuleClass<nn::Linear>(nn, "Linear")
      .def(py::init(linear), py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true,
           py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none())
      .def_property_readonly("weight", [](const nn::Linear& l) { return l.weight(); })
      .def_property_readonly("bias", [](const nn::Linear& l) { return l.bias(); })
      .def_property_readonly("in_features", &nn::Linear::in_features)
      .def_property_readonly("out_features", &nn::Linear::out_features);
  ModuleClass<nn::LinearReLU>(nn, "LinearReLU")  // a subclass of Linear in C++; here a Module with its properties
      .def(py::init([](int64_t in, int64_t out, bool bias, const dt& d, const dt& dev) {
        return std::make_shared<nn::LinearReLU>(in, out, bias, to_dtype(d), to_device(dev));
      }), py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true, py::kw_only(),
           py::arg("dtype") = py::none(), py::arg("device") = py::none())
      .def_property_readonly("weight", [](const nn::LinearReLU& l) { return l.weight(); })
      .def_property_readonly("bias", [](const nn::LinearReLU& l) { return l.bias(); });
  ModuleClass<nn::Identity>(nn, "Identity").def(py::init<>());
  ModuleClass<nn::ReLU>(nn, "ReLU").def(py::init<>());
  ModuleClass<nn::Flatten>(nn, "Flatten").def(py::init<>());
  ModuleClass<nn::Dropout>(nn, "Dropout").def(py::init([](double p) { return std::make_shared<nn::Dropout>(p); }),
                                               py::arg("p") = 0.5);
  ModuleClass<nn::Conv2d>(nn, "Conv2d")
      .def(py::init([](int64_t in, int64_t out, const py::object& k, const py::object& s, const py::object& p, bool bias,
                       const dt& d, const dt& dev) {
        return std::make_shared<nn::Conv2d>(in, out, to_size2(k), to_size2(s), to_size2(p), bias, to_dtype(d),
                                            to_device(dev));
      }), py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("bias") = true, py::kw_only(), py::arg("dtype") = py::none(),
           py::arg("device") = py::none())
      .def_property_readonly("weight", [](const nn::Conv2d& c) { return c.weight(); })
      .def_property_readonly("bias", [](const nn::Conv2d& c) { return c.bias(); });
  auto bn = [](int64_t n, double eps, double momentum, const dt& d, const dt& dev) {
    return std::make_shared<nn::BatchNorm2d>(n, eps, momentum, to_dtype(d), to_device(dev));
  };
  ModuleClass<nn::BatchNorm2d>(nn, "BatchNorm2d")
      .def(py::init(bn), py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::kw_only(),
           py::arg("dtype") = py::none(), py::arg("device") = py::none())
      .def_property_readonly("weight", [](const nn::BatchNorm2d& b) { return b.weight(); })
      .def_property_readonly("bias", [](const nn::BatchNorm2d& b) { return b.bias(); })
      .def_property_readonly("running_mean", &nn::BatchNorm2d::running_mean)
      .def_property_readonly("running_var", &nn::BatchNorm2d::running_var);
  ModuleClass<nn::BatchNormReLU>(nn, "BatchNormReLU")
      .def(py::init([](int64_t n, double eps, double momentum, const dt& d, const dt& dev) {
        return std::make_shared<nn::BatchNormReLU>(n, eps, momentum, to_dtype(d), to_device(dev));
      }), py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::kw_only(),
           py::arg("dtype") = py::none(), py::arg("device") = py::none());
  ModuleClass<nn::BatchNormReLUPool>(nn, "BatchNormReLUPool")
      .def(py::init([](int64_t n, const py::object& k, const py::object& s, const py::object& p, double eps,
                       double momentum, const dt& d, const dt& dev) {
        std::optional<nn::Size2> stride;
        if (!s.is_none()) stride = to_size2(s);
        const ops::Pool2dParams pool = nn::MaxPool2d(to_size2(k), stride, to_size2(p)).params();  // its checks
        return std::make_shared<nn::BatchNormReLUPool>(n, pool, eps, momentum, to_dtype(d), to_device(dev));
      }), py::arg("num_features"), py::arg("kernel_size") = 2, py::arg("stride") = py::none(), py::arg("padding") = 0,
           py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::kw_only(), py::arg("dtype") = py::none(),
           py::arg("device") = py::none());
  ModuleClass<nn::MaxPool2d>(nn, "MaxPool2d")
      .def(py::init([](const py::object& k, const py::object& s, const py::object& p) {
        std::optional<nn::Size2> stride;
        if (!s.is_none()) stride = to_size2(s);
        return std::make_shared<nn::MaxPool2d>(to_size2(k), stride, to_size2(p));
      }), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
}

void init_sequential(py::module_& nn) {
  ModuleClass<nn::Sequential>(nn, "Sequential")
      .def(py::init([](const py::args& modules) {
        auto seq = std::make_shared<nn::Sequential>();
        for (const py::handle m : modules) seq->push_back(m.cast<ModulePtr>());
        return seq;
      }))
      .def("append", [](py::object self, const ModulePtr& m) { self.cast<nn::Sequential&>().push_back(m); return self; })
      .def("__len__", &nn::Sequential::size)
      .def("__getitem__", [](const nn::Sequential& s, int64_t i) {
        auto n = static_cast<int64_t>(s.size());
        if (i < -n || i >= n) throw py::index_error("Sequential index " + std::to_string(i) + " out of range");
        return s.children()[static_cast<size_t>(i < 0 ? i + n : i)].second;
      });
  nn.def("fuse", [](nn::Sequential& s) { return nn::fuse(s); }, py::arg("model"),
         "Fuses each Linear+ReLU and BatchNorm2d+ReLU pair in place (state_dict names unchanged); returns the count");
}

template <typename Loss>
void init_loss(py::module_& nn, const char* name, const char* input, const char* target) {
  py::class_<Loss>(nn, name)
      .def(py::init<>())
      .def("forward", &Loss::forward, py::arg(input), py::arg(target))
      .def("__call__", &Loss::forward, py::arg(input), py::arg(target))
      .def("backward", &Loss::backward, py::arg("grad_loss") = 1.0,
           "The gradient w.r.t. the last forward's input, for grad_loss the gradient of the loss");
}

}  // namespace

void init_nn(py::module_& m) {
  py::module_ nn = m.def_submodule("nn", "Modules with explicit backward, and losses");
  init_parameter(nn);
  init_module(nn);
  init_layers(nn);
  init_sequential(nn);
  init_nn_transformer(nn);
  init_loss<nn::CrossEntropyLoss>(nn, "CrossEntropyLoss", "input", "target");
  init_loss<nn::MSELoss>(nn, "MSELoss", "input", "target");
  py::class_<nn::CrossEntropyLoss>(nn.attr("CrossEntropyLoss"))
      .def_property_readonly("probabilities", &nn::CrossEntropyLoss::probabilities);
}

}  // namespace ember::python
