// torchneuron._C.compile: the C++ compile layer (csrc/compile/): the compiled wrapper's
// allocation entry and kernel launches (torchneuron/compile/).
#include "python/Bindings.h"

#include "compile/CompileAllocation.h"
#include "compile/KernelLaunch.h"

#include <torch/csrc/utils/pybind.h>

namespace torchneuron {

void bind_compile(py::module& parent) {
  py::module m = parent.def_submodule("compile", "the C++ compile layer (csrc/compile/)");
  // Bare CPython functions, not pybind11's: their call overhead is what torch.compile pays.
  m.add_object("empty_strided", py::reinterpret_steal<py::object>(empty_strided_function()));
  m.add_object("launch_kernel", py::reinterpret_steal<py::object>(launch_function()));
  m.add_object("as_one_item", py::reinterpret_steal<py::object>(as_one_item_function()));
}

}  // namespace torchneuron
