// torchneuron._C.launch: the launch decision (csrc/aten/Launch.h, csrc/aten/Accounting.h): the
// eager mode, the state of the current device's queued work, settling it, what this thread's
// device-graph capture recorded so far (csrc/aten/GraphCapture.h), and the readiness accounting
// counted at the decision (read by torchneuron/device/accounting.py).
#include "python/Bindings.h"

#include "aten/Accounting.h"
#include "aten/GraphCapture.h"
#include "aten/Launch.h"

#include <torch/csrc/utils/pybind.h>

namespace torchneuron {

void bind_launch(py::module& parent) {
  py::module m = parent.def_submodule(
      "launch", "the launch decision (csrc/aten/Launch.h) and its readiness accounting");
  // The eager mode ("sync", "async" or "fused"), set once by the configuration.
  m.def("configure_execution", [](const std::string& mode, bool launch_blocking) {
    using launch::EagerMode;
    for (EagerMode m : {EagerMode::kSync, EagerMode::kAsync, EagerMode::kFused}) {
      if (mode == launch::mode_name(m)) return launch::configure(m, launch_blocking);
    }
    TORCH_CHECK_VALUE(false, "neuron: unknown eager mode '", mode, "'");
  }, py::call_guard<py::gil_scoped_release>());
  m.def("configured_eager_mode", [] { return launch::mode_name(launch::configured_mode()); });
  m.def("eager_mode", [] { return launch::mode_name(launch::effective_mode()); });
  m.def("launch_blocking", &launch::launch_blocking);
  m.def("device_idle", &launch::idle);
  m.def("queued_items", &launch::queued_items);
  // Waits release the GIL: queued work never needs it, but other Python threads may run.
  m.def("settle", &launch::settle, py::call_guard<py::gil_scoped_release>());
  // The pieces of work this thread's open capture recorded so far (torch.neuron.NeuronGraph).
  m.def("captured_work", &launch::captured_work);

  m.def("accounting_set_enabled", &accounting::set_enabled);
  m.def("accounting_enabled", &accounting::enabled);
  m.def("accounting_set_host_fallback_ops", &accounting::set_host_fallback_ops);
  m.def("accounting_reset", &accounting::reset);
  m.def("accounting_records", [] {
    py::list out;
    for (const auto& r : accounting::records()) {
      out.append(py::make_tuple(r.kind, r.op, r.location, r.detail, r.count, r.bytes_to_host,
                                r.bytes_from_host, r.cpu_ns));
    }
    return out;
  });
}

}  // namespace torchneuron
