// The registration functions of torchneuron._C's submodules, one per C++ layer with bindings
// (docs/architecture.md#the-layers). Module.cpp's PYBIND11_MODULE calls each, bottom-up; each adds
// its layer's submodule to `m` and binds that layer's functions there, and nowhere else.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torchneuron {

void bind_runtime(py::module& m);   // RuntimeBindings.cpp: _C.runtime, the runtime seam
void bind_profiler(py::module& m);  // ProfilerBindings.cpp: _C.profiler, the recorders
void bind_launch(py::module& m);    // LaunchBindings.cpp: _C.launch, the launch decision
void bind_device(py::module& m);    // DeviceBindings.cpp: _C.device, the C++ device
void bind_aten(py::module& m);      // AtenBindings.cpp: _C.aten, the C++ ATen layer
void bind_ops(py::module& m);       // OpsBindings.cpp: _C.ops, the C++ ops
void bind_compile(py::module& m);   // CompileBindings.cpp: _C.compile, the C++ compile layer
void bind_fused_eager(py::module& m);  // FusedEagerBindings.cpp: _C.fused_eager, fused eager

}  // namespace torchneuron
