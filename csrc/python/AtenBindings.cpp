// torchneuron._C.aten: the C++ ATen layer (csrc/aten/): the registration steps of the fallback
// and the kernels, the CPU aliases of neuron memory, and the one host-access check.
#include "python/Bindings.h"

#include "aten/CpuAlias.h"
#include "aten/Fallback.h"
#include "aten/HostAccess.h"
#include "aten/HostKernels.h"
#include "aten/KernelScope.h"

#include <torch/csrc/utils/pybind.h>

namespace torchneuron {

void bind_aten(py::module& parent) {
  py::module m = parent.def_submodule("aten", "the C++ ATen layer (csrc/aten/)");
  // Registration steps: the first two once, from torchneuron/__init__.py; guard_host_kernels once
  // per extension's op namespace (torchneuron/runtime/execution.py).
  m.def("install_kernel_cpu_allocator", &install_kernel_cpu_allocator);
  m.def("route_to_cpu_kernels", &route_to_cpu_kernels);
  m.def("guard_host_kernels", &guard_host_kernels);

  m.def("cpu_alias", &cpu_alias_keeping_storage);
  m.def("host_addressable", &host_addressable);
  m.def("require_host_access", [](const std::string& what) { require_host_access(what.c_str()); });
  m.def("override_host_addressable_for_testing", &override_host_addressable_for_testing);
}

}  // namespace torchneuron
