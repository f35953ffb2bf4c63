// torchneuron._C: the Python face of the core, bindings only. Python configures the runtime once
// (profile + environment, see torchneuron/runtime/config.py), calls the registration steps in
// torchneuron/__init__.py's order, and reads the allocator's figures here.
#include "aten/Accounting.h"
#include "aten/CpuAlias.h"
#include "aten/Fallback.h"
#include "aten/HostKernels.h"
#include "aten/HostAccess.h"
#include "aten/KernelScope.h"
#include "compile/CompileAllocation.h"
#include "compile/KernelLaunch.h"
#include "device/CurrentDevice.h"
#include "device/DeviceWork.h"
#include "aten/Launch.h"
#include "device/Lifecycle.h"
#include "device/NeuronAllocator.h"
#include "device/NeuronGenerator.h"
#include "device/NeuronHooks.h"
#include "device/SharedStorage.h"
#include "ops/Autocast.h"
#include "ops/DtypePolicy.h"
#include "profiler/KernelActivity.h"
#include "profiler/MemoryHistory.h"
#include "profiler/PythonLine.h"
#include "profiler/RecordedActivity.h"
#include "python/FusionBindings.h"
#include "runtime/NeuronRuntime.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>


// Declared in torch/csrc/profiler/python/combined_traceback.h, which includes nlohmann/json,
// a header torch's wheel does not ship; libtorch_python exports it.
// internal: see runtime/torch_internals.py "torch::py_symbolize"
namespace torch {
TORCH_PYTHON_API std::vector<pybind11::object> py_symbolize(
    std::vector<CapturedTraceback*>& to_symbolize);
}  // namespace torch

namespace {

namespace tn = torchneuron;

py::list memory_snapshot() {
  std::vector<tn::SegmentRecord> segments;
  {
    // Waiting for the allocator's lock without the GIL (see _set_memory_fraction below).
    py::gil_scoped_release no_gil;
    segments = tn::neuron_allocator().snapshot();
  }
  py::list out;
  for (const auto& s : segments) {
    py::dict d;
    d["device"] = s.device;
    d["address"] = s.address;
    d["size"] = s.size;
    d["requested_size"] = s.requested;
    d["allocated"] = s.allocated;
    out.append(d);
  }
  return out;
}

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

py::list operands(const std::vector<tn::profiler::Operand>& ops) {
  py::list out;
  for (const auto& o : ops) out.append(py::make_tuple(o.shape, o.dtype));
  return out;
}

// The last profiler session's device activities, for torchneuron.profiler's estimate.
py::list profiler_records() {
  py::list out;
  for (const auto& r : tn::profiler::last_session_records()) {
    py::dict d;
    d["name"] = r.name;
    d["device"] = r.device;
    d["stream"] = r.stream;
    d["start_ns"] = r.start_ns;
    d["end_ns"] = r.end_ns;
    d["correlation"] = r.correlation;
    d["annotation"] = r.annotation;
    d["memcpy"] = r.memcpy;
    d["inputs"] = operands(r.inputs);
    d["outputs"] = operands(r.outputs);
    out.append(d);
  }
  return out;
}

// (action, device, address, size, requested, time_us, frames): frames as CUDA's snapshots hold
// them, [{"filename", "line", "name"}, ...] innermost first, empty without stacks.
py::list memory_history() {
  static const char* kActions[] = {"alloc", "free", "segment_alloc", "segment_free", "oom"};
  const std::vector<tn::profiler::MemoryEvent> events = tn::profiler::memory_history();
  std::vector<torch::CapturedTraceback*> stacks;
  for (const auto& e : events) {
    if (e.frames) stacks.push_back(e.frames.get());
  }
  // internal: see runtime/torch_internals.py "torch::py_symbolize"
  const std::vector<py::object> symbolized = torch::py_symbolize(stacks);
  py::list out;
  std::size_t next = 0;
  for (const auto& e : events) {
    py::object frames = e.frames ? symbolized[next++] : py::list();
    out.append(py::make_tuple(kActions[static_cast<int>(e.action)], e.device, e.address, e.size,
                              e.requested, e.time_us, frames));
  }
  return out;
}

py::object* g_oom_hook = nullptr;

std::vector<tn::profiler::Operand> operands_of(const py::list& pairs) {
  std::vector<tn::profiler::Operand> out;
  for (const auto& p : pairs) {
    auto t = p.cast<py::tuple>();
    out.push_back({t[0].cast<std::vector<int64_t>>(), t[1].cast<std::string>()});
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torchneuron core: allocator, device guard, hooks, kernels and fallback";

  // Registration steps, each called once from torchneuron/__init__.py, in its order.
  m.def("_configure", &tn::rt::configure);
  m.def("_set_lazy_configurator", [](py::function fn) {
    if (g_configurator == nullptr) g_configurator = new py::object();  // lives as long as _C
    *g_configurator = std::move(fn);
    tn::rt::set_lazy_configurator(&call_configurator);
  });
  m.def("_register_hooks", &tn::register_hooks);
  m.def("_install_kernel_cpu_allocator", &tn::install_kernel_cpu_allocator);
  m.def("_route_to_cpu_kernels", &tn::route_to_cpu_kernels);
  m.def("_guard_host_kernels", &tn::guard_host_kernels);

  m.def("_is_configured", &tn::rt::configured);
  m.def("_init", &tn::mark_initialized);
  m.def("_is_initialized", &tn::is_initialized);
  m.def("_is_in_bad_fork", &tn::in_bad_fork);
  m.def("_check_not_in_bad_fork", &tn::check_not_in_bad_fork);
  m.def("_backing_memory_total", &tn::rt::backing_memory_total);
  m.def("_backing_memory_available", &tn::rt::backing_memory_available);
  m.def("_device_count", &tn::rt::device_count);
  m.def("_hbm_capacity", &tn::rt::hbm_capacity);
  m.def("_get_device", [] { return static_cast<int>(tn::current_device()); });
  m.def("_set_device", [](int64_t d) {
    tn::check_device(d);
    tn::set_current_device(static_cast<c10::DeviceIndex>(d));
  });
  m.def("_check_device", [](int64_t d) { tn::check_device(d); });
  // Waits release the GIL: queued work never needs it, but other Python threads may run.
  m.def("_synchronize", &tn::synchronize, py::call_guard<py::gil_scoped_release>());
  m.def("_settle", &tn::launch::settle, py::call_guard<py::gil_scoped_release>());
  // Every wait for queued work, wherever in C++ it happens, releases the GIL if it is held.
  tn::rt::set_wait_wrapper([](void (*wait)(void*), void* context) {
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release no_gil;
      wait(context);
    } else {
      wait(context);
    }
  });
  // The eager mode ("sync", "async" or "fused"), set once by the configuration.
  m.def("_configure_execution", [](const std::string& mode, bool launch_blocking) {
    using tn::launch::EagerMode;
    for (EagerMode m : {EagerMode::kSync, EagerMode::kAsync, EagerMode::kFused}) {
      if (mode == tn::launch::mode_name(m)) return tn::launch::configure(m, launch_blocking);
    }
    TORCH_CHECK_VALUE(false, "neuron: unknown eager mode '", mode, "'");
  }, py::call_guard<py::gil_scoped_release>());
  tn::bind_fusion(m);
  m.def("_configured_eager_mode", [] {
    return tn::launch::mode_name(tn::launch::configured_mode());
  });
  m.def("_eager_mode", [] { return tn::launch::mode_name(tn::launch::effective_mode()); });
  m.def("_launch_blocking", &tn::launch::launch_blocking);
  m.def("_device_idle", &tn::launch::idle);
  m.def("_queued_items", &tn::launch::queued_items);
  m.def("_sleep", &tn::sleep_on_current_stream, py::call_guard<py::gil_scoped_release>());

  m.def("_empty_cache", [] { tn::neuron_allocator().emptyCache(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("_mem_get_info", [](int d) {
    return tn::neuron_allocator().getMemoryInfo(static_cast<c10::DeviceIndex>(d));
  });
  // Every binding that takes the allocator's lock waits for it without the GIL, so that other
  // Python threads run meanwhile (the allocator holds it while it empties its cache, which
  // waits for queued work).
  m.def("_set_memory_fraction", [](double fraction, int d) {
    tn::neuron_allocator().set_memory_fraction(fraction, static_cast<c10::DeviceIndex>(d));
  }, py::call_guard<py::gil_scoped_release>());
  m.def("_get_memory_fraction", [](int d) {
    return tn::neuron_allocator().memory_fraction(static_cast<c10::DeviceIndex>(d));
  }, py::call_guard<py::gil_scoped_release>());
  m.def("_memory_snapshot", &memory_snapshot);
  m.def("_block_size", [] { return tn::NeuronCachingAllocator::kBlockSize; });

  m.def("_set_float64_policy", [](int policy, const std::vector<std::string>& exempt) {
    tn::set_float64_policy(static_cast<tn::Float64Policy>(policy), exempt);
  });
  m.def("_float64_host_fallback_counts", &tn::float64_host_fallback_counts);
  m.def("_reset_float64_host_fallbacks", &tn::reset_float64_host_fallbacks);

  // The readiness accounting (aten/Accounting.h), read by torchneuron/device/accounting.py.
  m.def("_accounting_set_enabled", &tn::accounting::set_enabled);
  m.def("_accounting_enabled", &tn::accounting::enabled);
  m.def("_accounting_set_host_fallback_ops", &tn::accounting::set_host_fallback_ops);
  m.def("_accounting_set_internal_dirs", &tn::profiler::set_internal_python_dirs);
  m.def("_accounting_reset", &tn::accounting::reset);
  m.def("_accounting_records", [] {
    py::list out;
    for (const auto& r : tn::accounting::records()) {
      out.append(py::make_tuple(r.kind, r.op, r.location, r.detail, r.count, r.bytes_to_host,
                                r.bytes_from_host, r.cpu_ns));
    }
    return out;
  });

  m.def("_cpu_alias", &tn::cpu_alias_keeping_storage);
  // torch.multiprocessing's reduction of neuron storages (torchneuron/device/ipc.py): `t` is a
  // tensor over the whole storage.
  // These take the allocator's lock (its statistics count shared blocks): without the GIL.
  m.def("_share_storage", [](const at::Tensor& t) { return tn::share_storage(t.storage()); },
        py::call_guard<py::gil_scoped_release>());
  m.def("_is_shared_storage", [](const at::Tensor& t) { return tn::is_shared_storage(t.storage()); });
  m.def("_ipc_collect", &tn::collect_released, py::call_guard<py::gil_scoped_release>());
  m.def("_open_shared_storage", [](int fd, std::size_t nbytes, int device) {
    return tn::open_shared_storage(fd, nbytes, static_cast<c10::DeviceIndex>(device));
  }, py::call_guard<py::gil_scoped_release>());
  m.def("_host_addressable", &tn::host_addressable);
  m.def("_require_host_access", [](const std::string& what) { tn::require_host_access(what.c_str()); });
  m.def("_override_host_addressable_for_testing", &tn::override_host_addressable_for_testing);
  // A bare CPython function, not pybind11's: its call overhead is what torch.compile pays.
  m.add_object("_empty_strided", py::reinterpret_steal<py::object>(tn::empty_strided_function()));
  m.add_object("_launch_kernel", py::reinterpret_steal<py::object>(tn::launch_function()));
  m.add_object("_as_one_item", py::reinterpret_steal<py::object>(tn::as_one_item_function()));
  m.def("_autocast_op_lists", &tn::autocast_op_lists);

  m.def("_default_generator", [](int d) {
    return tn::device_generator(static_cast<c10::DeviceIndex>(d));
  });
  m.def("_set_draws_from_cpu_generator", &tn::set_draws_from_cpu_generator);
  m.def("_draws_from_cpu_generator", &tn::draws_from_cpu_generator);

  m.def("_profiler_records", &profiler_records);
  m.def("_profiler_recording", &tn::profiler::recording);
  m.def("_range_push", &tn::profiler::range_push);
  m.def("_range_pop", &tn::profiler::range_pop);
  m.def("_mark", &tn::profiler::mark);
  m.def("_device_clock_ns", &tn::rt::clock_ns);
  m.def("_record_activity", [](std::string name, int device, int64_t start_ns, int64_t end_ns,
                               const py::list& inputs, const py::list& outputs) {
    tn::profiler::KernelRecord r;
    r.name = std::move(name);
    r.device = device;
    r.start_ns = start_ns;
    r.end_ns = end_ns;
    r.inputs = operands_of(inputs);
    r.outputs = operands_of(outputs);
    tn::profiler::record_activity(std::move(r));
  });
  m.def("_set_memory_history", &tn::profiler::set_memory_history, py::arg("enabled"),
        py::arg("max_entries"), py::arg("stacks") = false);
  m.def("_memory_history", &memory_history);
  m.def("_set_oom_hook", [](py::object fn) {
    if (g_oom_hook == nullptr) g_oom_hook = new py::object();  // lives as long as _C
    *g_oom_hook = std::move(fn);
    tn::profiler::set_oom_hook([](int device, std::size_t size, std::size_t usable) {
      py::gil_scoped_acquire gil;
      if (g_oom_hook->is_none()) return std::string();
      try {
        return (*g_oom_hook)(device, size, usable).cast<std::string>();
      } catch (py::error_already_set& e) {
        return std::string(" (writing the out-of-memory snapshot failed: ") + e.what() + ")";
      }
    });
  });
}
