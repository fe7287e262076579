// ember._C: the compiled half of the Python package `ember` (python/ember/ re-exports it, like torch._C).
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
}
