// ember._C.optim: SGD and AdamW over nn Parameters (PyTorch's argument orders), and the learning-rate schedules.
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "python/src/bindings.h"

namespace ember::python {
namespace {

std::vector<nn::ParameterPtr> parameters(const py::iterable& params) {
  std::vector<nn::ParameterPtr> out;
  for (const py::handle p : params) out.push_back(p.cast<nn::ParameterPtr>());
  return out;
}

py::dict state_dict(const optim::Optimizer& o) {
  optim::OptimizerState s = o.state_dict();
  py::dict tensors, out;
  for (auto& [name, t] : s.tensors) tensors[py::str(name)] = t;
  out["state"] = tensors;
  out["scalars"] = s.scalars;
  return out;
}

void load_state_dict(optim::Optimizer& o, const py::dict& d) {
  optim::OptimizerState s;
  for (auto [name, t] : d["state"].cast<py::dict>()) s.tensors.emplace_back(name.cast<std::string>(), t.cast<Tensor>());
  s.scalars = d["scalars"].cast<std::map<std::string, double>>();
  o.load_state_dict(s);
}

void init_optimizers(py::module_& optim) {
  py::class_<optim::Optimizer>(optim, "Optimizer")
      .def("step", &optim::Optimizer::step)
      .def("zero_grad", &optim::Optimizer::zero_grad)
      .def_property("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr, "The learning rate of the next step")
      .def("state_dict", &state_dict)
      .def("load_state_dict", &load_state_dict, py::arg("state_dict"))
      .def_property_readonly("params", &optim::Optimizer::params);
  py::class_<optim::SGD, optim::Optimizer>(optim, "SGD")
      .def(py::init([](const py::iterable& params, double lr, double momentum, double dampening, double weight_decay,
                       bool nesterov) {
        return std::make_unique<optim::SGD>(parameters(params), ops::SgdOptions{lr, momentum, dampening, weight_decay,
                                                                                nesterov});
      }), py::arg("params"), py::arg("lr") = 1e-3, py::arg("momentum") = 0, py::arg("dampening") = 0,
           py::arg("weight_decay") = 0, py::kw_only(), py::arg("nesterov") = false);
  py::class_<optim::AdamW, optim::Optimizer>(optim, "AdamW")
      .def(py::init([](const py::iterable& params, double lr, std::pair<double, double> betas, double eps,
                       double weight_decay) {
        return std::make_unique<optim::AdamW>(parameters(params),
                                              ops::AdamWOptions{lr, betas.first, betas.second, eps, weight_decay});
      }), py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 1e-2);
}

void init_schedules(py::module_& optim) {
  py::class_<optim::LrSchedule>(optim, "LrSchedule", "A learning rate as a function of the global step (0-based)")
      .def("lr_at", &optim::LrSchedule::lr_at, py::arg("step"));
  py::class_<optim::ConstantLr, optim::LrSchedule>(optim, "ConstantLr").def(py::init<double>(), py::arg("lr"));
  py::class_<optim::StepLr, optim::LrSchedule>(optim, "StepLr")
      .def(py::init<double, int64_t, double>(), py::arg("lr"), py::arg("step_size"), py::arg("gamma") = 0.1);
  py::class_<optim::CosineLr, optim::LrSchedule>(optim, "CosineLr")
      .def(py::init<double, int64_t, int64_t, double>(), py::arg("lr"), py::arg("total_steps"),
           py::arg("warmup_steps") = 0, py::arg("min_lr") = 0);
}

}  // namespace

void init_optim(py::module_& m) {
  py::module_ optim = m.def_submodule("optim", "Optimizers and learning-rate schedules");
  init_optimizers(optim);
  init_schedules(optim);
}

}  // namespace ember::python
