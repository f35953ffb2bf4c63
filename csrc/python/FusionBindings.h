// torchneuron._C's fused-eager functions (FusionBindings.cpp).
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torchneuron {
void bind_fusion(py::module& m);
}  // namespace torchneuron
