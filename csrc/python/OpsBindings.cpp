// torchneuron._C.ops: the C++ ops layer (csrc/ops/): the float64 policy and its host-fallback
// counts, and the autocast op lists.
#include "python/Bindings.h"

#include "ops/Autocast.h"
#include "ops/DtypePolicy.h"

#include <torch/csrc/utils/pybind.h>

namespace torchneuron {

void bind_ops(py::module& parent) {
  py::module m = parent.def_submodule("ops", "the C++ ops layer (csrc/ops/)");
  m.def("set_float64_policy", [](int policy, const std::vector<std::string>& exempt) {
    set_float64_policy(static_cast<Float64Policy>(policy), exempt);
  });
  m.def("float64_host_fallback_counts", &float64_host_fallback_counts);
  m.def("reset_float64_host_fallbacks", &reset_float64_host_fallbacks);
  m.def("autocast_op_lists", &autocast_op_lists);
}

}  // namespace torchneuron
