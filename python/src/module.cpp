// ember._C: the compiled half of the Python package `ember` (python/ember/ re-exports it, like torch._C).
#include "core/host.h"
#include "python/src/bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "ember's C++ engine: tensors, devices, DLPack, nn, optim, data and safetensors I/O";
  using namespace ember::python;
  init_errors(m);
  init_tensor(m);
  init_tensor_ops(m);
  init_dlpack(m);
  init_nn(m);
  init_optim(m);
  init_data_io(m);
  // The host backend's settings, under PyTorch's names.
  m.def("set_num_threads", &ember::set_num_threads, py::arg("threads"),
        "Host threads for the CPU kernels, the caller included (0: every core this process may run on)");
  m.def("get_num_threads", &ember::num_threads);
  m.def("set_flush_denormal", [](bool on) {
    ember::set_flush_denormals(on);
    return ember::flush_denormals() == on;
  }, py::arg("mode"), "Flushes denormal floats to zero in the CPU kernels (as `ember train` does by default); "
     "True when the CPU supports it");
}
