// torchneuron._C.runtime: the runtime seam (csrc/runtime/): its configuration, what it reports
// of the devices and their backing memory, and its clock. Python configures it once (profile and
// environment, torchneuron/runtime/config.py).
#include "python/Bindings.h"

#include "runtime/Execution.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/ProtectedMemory.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

namespace torchneuron {
namespace {

// torchneuron.runtime.device_state.configure, called by the runtime when a device query finds it
// unconfigured. A Python error (ConfigError) travels as torch's python_error, so it reaches the
// caller with its own type through ATen's error handling.
py::object* g_configurator = nullptr;

void call_configurator() {
  py::gil_scoped_acquire gil;
  try {
    (*g_configurator)();
  } catch (py::error_already_set& e) {
    e.restore();
    throw python_error();
  }
}

}  // namespace

void bind_runtime(py::module& parent) {
  py::module m = parent.def_submodule("runtime", "the runtime seam (csrc/runtime/)");
  m.def("configure", &rt::configure);
  m.def("set_lazy_configurator", [](py::function fn) {
    if (g_configurator == nullptr) g_configurator = new py::object();  // lives as long as _C
    *g_configurator = std::move(fn);
    rt::set_lazy_configurator(&call_configurator);
  });
  m.def("is_configured", &rt::configured);
  m.def("backing_memory_total", &rt::backing_memory_total);
  m.def("backing_memory_available", &rt::backing_memory_available);
  m.def("device_count", &rt::device_count);
  m.def("hbm_capacity", &rt::hbm_capacity);
  m.def("device_clock_ns", &rt::clock_ns);
  // NEURON_MEMORY_PROTECT=1 (runtime/ProtectedMemory.h): chosen before configure(); a window
  // makes device memory host-accessible for seam work that Python runs (a collective until its
  // wait(), an NKI kernel on the simulator, a compiled kernel).
  m.def("set_memory_protection", &rt::set_memory_protection);
  m.def("memory_protected", &rt::memory_protected);
  m.def("open_host_access", &rt::open_host_access);
  m.def("close_host_access", &rt::close_host_access);
  m.def("open_host_access_windows", &rt::open_host_access_windows);
  // Every wait for queued work, wherever in C++ it happens, releases the GIL if it is held.
  rt::set_wait_wrapper([](void (*wait)(void*), void* context) {
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release no_gil;
      wait(context);
    } else {
      wait(context);
    }
  });
}

}  // namespace torchneuron
