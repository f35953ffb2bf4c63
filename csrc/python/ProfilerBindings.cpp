// torchneuron._C.profiler: the profiler's recorders (csrc/profiler/): the kernel-activity
// recorder and its ranges, the memory history and the out-of-memory hook, and the user's Python
// line of a call (PythonLine.h).
#include "python/Bindings.h"

#include "profiler/KernelActivity.h"
#include "profiler/MemoryHistory.h"
#include "profiler/PythonLine.h"
#include "profiler/RecordedActivity.h"

#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

// Declared in torch/csrc/profiler/python/combined_traceback.h, which includes nlohmann/json,
// a header torch's wheel does not ship; libtorch_python exports it.
// internal: see runtime/torch_internals.py "torch::py_symbolize"
namespace torch {
TORCH_PYTHON_API std::vector<pybind11::object> py_symbolize(
    std::vector<CapturedTraceback*>& to_symbolize);
}  // namespace torch

namespace torchneuron {
namespace {

py::list operands(const std::vector<profiler::Operand>& ops) {
  py::list out;
  for (const auto& o : ops) out.append(py::make_tuple(o.shape, o.dtype));
  return out;
}

std::vector<profiler::Operand> operands_of(const py::list& pairs) {
  std::vector<profiler::Operand> out;
  for (const auto& p : pairs) {
    auto t = p.cast<py::tuple>();
    out.push_back({t[0].cast<std::vector<int64_t>>(), t[1].cast<std::string>()});
  }
  return out;
}

// The last profiler session's device activities, for torchneuron.profiler's estimate.
py::list session_records() {
  py::list out;
  for (const auto& r : profiler::last_session_records()) {
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
py::list memory_history_events() {
  static const char* kActions[] = {"alloc", "free", "segment_alloc", "segment_free", "oom"};
  const std::vector<profiler::MemoryEvent> events = profiler::memory_history();
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

}  // namespace

void bind_profiler(py::module& parent) {
  py::module m = parent.def_submodule("profiler", "the profiler's recorders (csrc/profiler/)");
  m.def("records", &session_records);
  m.def("recording", &profiler::recording);
  m.def("range_push", &profiler::range_push);
  m.def("range_pop", &profiler::range_pop);
  m.def("mark", &profiler::mark);
  m.def("record_activity", [](std::string name, int device, int64_t start_ns, int64_t end_ns,
                              const py::list& inputs, const py::list& outputs) {
    profiler::KernelRecord r;
    r.name = std::move(name);
    r.device = device;
    r.start_ns = start_ns;
    r.end_ns = end_ns;
    r.inputs = operands_of(inputs);
    r.outputs = operands_of(outputs);
    profiler::record_activity(std::move(r));
  });
  m.def("set_memory_history", &profiler::set_memory_history, py::arg("enabled"),
        py::arg("max_entries"), py::arg("stacks") = false);
  m.def("memory_history", &memory_history_events);
  m.def("set_oom_hook", [](py::object fn) {
    if (g_oom_hook == nullptr) g_oom_hook = new py::object();  // lives as long as _C
    *g_oom_hook = std::move(fn);
    profiler::set_oom_hook([](int device, std::size_t size, std::size_t usable) {
      py::gil_scoped_acquire gil;
      if (g_oom_hook->is_none()) return std::string();
      try {
        return (*g_oom_hook)(device, size, usable).cast<std::string>();
      } catch (py::error_already_set& e) {
        return std::string(" (writing the out-of-memory snapshot failed: ") + e.what() + ")";
      }
    });
  });
  // The user's line of a call ("file:line", the innermost frame outside torch and torchneuron),
  // as the readiness accounting names its findings; the directories that are "inside".
  m.def("user_python_line", &profiler::user_python_line);
  m.def("set_internal_python_dirs", &profiler::set_internal_python_dirs);
}

}  // namespace torchneuron
