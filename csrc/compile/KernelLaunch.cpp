// Asynchronous execution for compiled graphs. Inductor compiles a neuron graph's fused loops as
// CPU C++ kernels (the software NeuronCore's kernels, on host-addressable device memory) and
// calls them from a generated Python wrapper. Here a kernel call becomes a launch: when queuing,
// the kernel's arguments are resolved at the call (tensors to their data pointers, whose memory
// the wrapper allocated at the call; ints by value) and the stream's worker calls the kernel's
// C entry point with them, without Python's GIL, so the calling thread runs on. A call Python
// must make (an argument the C entry point cannot take by value) holds the GIL on the worker.
//
// A graph's `call` runs inside launch::ItemScope (as_one_item), so its kernels and the extern ops
// it dispatches (matmuls, fallbacks) reach the stream as one item, in the wrapper's order.
#include "compile/KernelLaunch.h"

#include "aten/Launch.h"

#include <c10/util/Exception.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torchneuron {
namespace {

// Inductor's C++ kernels take pointers and 64-bit ints only (floats go through Python below), all
// passed in integer registers or integer stack slots: a call through a prototype of N uintptr_t
// parameters is the same call as through the kernel's own prototype of N such parameters.
using RawCall = void (*)(void* entry, const std::uintptr_t* args);
constexpr std::size_t kMaxRawArgs = 64;

template <std::size_t... I>
void call_entry(void* entry, const std::uintptr_t* args, std::index_sequence<I...>) {
  using Entry = void (*)(decltype(static_cast<void>(I), std::uintptr_t{})...);
  reinterpret_cast<Entry>(entry)(args[I]...);
}
template <std::size_t N>
void call_with_n(void* entry, const std::uintptr_t* args) {
  call_entry(entry, args, std::make_index_sequence<N>{});
}
template <std::size_t... N>
constexpr std::array<RawCall, sizeof...(N)> raw_calls(std::index_sequence<N...>) {
  return {&call_with_n<N>...};
}
constexpr auto kRawCalls = raw_calls(std::make_index_sequence<kMaxRawArgs + 1>{});

// The C entry point (`kernel`) of a kernel Inductor loaded as a Python extension module
// (CppPythonBindingsCodeCache: the module's function `kernel` wraps the C function `kernel`),
// or nullptr. Found once per kernel; the map keeps the kernel object, so its address is not reused.
void* entry_point(PyObject* kernel) {
  static auto* found = new std::unordered_map<PyObject*, void*>();  // guarded by the GIL
  auto it = found->find(kernel);
  if (it != found->end()) return it->second;
  void* entry = nullptr;
  if (PyCFunction_Check(kernel)) {
    PyObject* module = PyCFunction_GET_SELF(kernel);
    if (module != nullptr && PyModule_Check(module)) {
      PyObject* path = PyModule_GetFilenameObject(module);  // new reference
      if (path != nullptr) {
        const char* file = PyUnicode_AsUTF8(path);
        if (void* handle = file ? dlopen(file, RTLD_LAZY | RTLD_NOLOAD) : nullptr) {
          entry = dlsym(handle, "kernel");
          dlclose(handle);  // the module keeps the library loaded
        }
        Py_DECREF(path);
      }
    }
  }
  PyErr_Clear();
  Py_INCREF(kernel);
  found->emplace(kernel, entry);
  return entry;
}

// Python references a queued call holds; dropped under the GIL on whichever thread frees them.
struct PythonRefs {
  std::vector<PyObject*> refs;
  ~PythonRefs() {
    if (refs.empty() || !Py_IsInitialized()) return;
    PyGILState_STATE gil = PyGILState_Ensure();
    for (PyObject* r : refs) Py_DECREF(r);
    PyGILState_Release(gil);
  }
};

[[noreturn]] void raise_python_error() {
  // The worker turns this into the device's pending error, raised at the next synchronization.
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  std::string message = "compiled kernel raised an error";
  if (value != nullptr) {
    if (PyObject* text = PyObject_Str(value)) {
      if (const char* utf8 = PyUnicode_AsUTF8(text)) message = utf8;
      Py_DECREF(text);
    }
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  PyErr_Clear();
  TORCH_CHECK(false, message);
}

// While record_kernel_calls runs a graph on this thread: the tensors it was given, the buffers
// it allocated itself, and the calls.
struct Recording {
  std::vector<at::Tensor> tensors;
  std::vector<c10::Storage> scratch;
  RecordedProgram program;
  std::string failure;  // set at the first launch that cannot be replayed
};
thread_local Recording* t_recording = nullptr;

// A kernel's tensor argument as (buffer, byte offset): one of the graph's tensors, a view of
// one, or a buffer the graph allocated (views of it included).
void record_tensor(Recording& r, const at::Tensor& t, RecordedCall& call) {
  const auto address = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  for (std::size_t k = 0; k < r.tensors.size(); ++k) {
    if (r.tensors[k].storage().unsafeGetStorageImpl() == storage) {
      call.buffer.push_back(static_cast<int>(k));
      call.value.push_back(address - reinterpret_cast<std::uintptr_t>(r.tensors[k].data_ptr()));
      return;
    }
  }
  std::size_t k = 0;
  while (k < r.scratch.size() && r.scratch[k].unsafeGetStorageImpl() != storage) ++k;
  if (k == r.scratch.size()) {
    r.scratch.push_back(t.storage());
    r.program.scratch_nbytes.push_back(t.storage().nbytes());
  }
  call.buffer.push_back(static_cast<int>(r.tensors.size() + k));
  call.value.push_back(address - reinterpret_cast<std::uintptr_t>(r.scratch[k].data()));
}

void record_launch(Recording& r, PyObject* kernel, PyObject* const* args, std::size_t n) {
  if (!r.failure.empty()) return;
  RecordedCall call;
  call.entry = n <= kMaxRawArgs ? entry_point(kernel) : nullptr;
  if (call.entry == nullptr) {
    r.failure = "a kernel without a C entry point taking at most 64 arguments";
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    PyObject* a = args[i];
    if (THPVariable_Check(a)) {
      const at::Tensor& t = THPVariable_Unpack(a);
      if (!t.is_privateuseone() || !t.has_storage()) {
        r.failure = "a kernel argument that is not a neuron tensor";
        return;
      }
      record_tensor(r, t, call);
    } else if (PyLong_Check(a)) {
      const long long v = PyLong_AsLongLong(a);
      if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        r.failure = "an integer kernel argument out of range";
        return;
      }
      call.buffer.push_back(-1);
      call.value.push_back(static_cast<std::uintptr_t>(v));
    } else {
      r.failure = "a kernel argument that is neither a tensor nor an integer";
      return;
    }
  }
  r.program.calls.push_back(std::move(call));
}

PyObject* launch_neuron(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(nargs >= 1 && PyCallable_Check(args[0]),
                   "launch_neuron(kernel, *args): the first argument must be the compiled kernel");
  PyObject* kernel = args[0];
  PyObject* const* kernel_args = args + 1;
  const std::size_t n = static_cast<std::size_t>(nargs - 1);
  if (t_recording != nullptr) {
    record_launch(*t_recording, kernel, kernel_args, n);
    Py_RETURN_NONE;
  }

  // Which stream: the first neuron buffer's device; a CPU tensor argument (read when the kernel
  // runs, which the caller could change in between) or none at all makes the call synchronous.
  bool queue = launch::decide(launch::Work::kCompiledKernel, 0) != launch::Launch::kInline;
  bool raw = n <= kMaxRawArgs;
  c10::DeviceIndex device = -1;
  for (std::size_t i = 0; queue && i < n; ++i) {
    PyObject* a = kernel_args[i];
    if (THPVariable_Check(a)) {
      const at::Tensor& t = THPVariable_Unpack(a);
      if (!t.is_privateuseone()) queue = false;
      else if (device < 0) device = t.device().index();
    } else if (!PyLong_Check(a)) {
      raw = false;  // a float (or anything else): only the Python binding converts it
    }
  }
  if (!queue || device < 0) {
    launch::settle();  // the kernel reads and writes neuron memory from this thread (waits drop the GIL)
    return PyObject_Vectorcall(kernel, kernel_args, n, nullptr);
  }

  const c10::Stream stream = launch::current_stream(device);
  void* entry = raw ? entry_point(kernel) : nullptr;
  if (entry != nullptr) {
    auto values = std::make_shared<std::vector<std::uintptr_t>>(n);
    std::vector<c10::Storage> storages;  // keeps the buffers' memory until the kernel ran
    for (std::size_t i = 0; i < n; ++i) {
      PyObject* a = kernel_args[i];
      if (THPVariable_Check(a)) {
        const at::Tensor& t = THPVariable_Unpack(a);
        (*values)[i] = reinterpret_cast<std::uintptr_t>(t.data_ptr());
        storages.push_back(t.storage());
      } else {
        const long long v = PyLong_AsLongLong(a);
        if (v == -1 && PyErr_Occurred()) throw python_error();
        (*values)[i] = static_cast<std::uintptr_t>(v);
      }
    }
    launch::enqueue(stream, "compiled kernel", [entry, values, storages = std::move(storages)] {
      kRawCalls[values->size()](entry, values->data());
    });
    Py_RETURN_NONE;
  }

  // Through the Python binding, on the worker, holding the GIL for the call.
  auto refs = std::make_shared<PythonRefs>();
  refs->refs.reserve(n + 1);
  for (Py_ssize_t i = 0; i <= static_cast<Py_ssize_t>(n); ++i) {
    Py_INCREF(args[i]);
    refs->refs.push_back(args[i]);
  }
  launch::enqueue(stream, "compiled kernel", [refs] {
    pybind11::gil_scoped_acquire gil;
    PyObject* result = PyObject_Vectorcall(refs->refs[0], refs->refs.data() + 1,
                                           refs->refs.size() - 1, nullptr);
    if (result == nullptr) raise_python_error();
    Py_DECREF(result);
  });
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef kLaunch = {
    "launch_kernel", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch_neuron)),
    METH_FASTCALL,
    "launch_kernel(kernel, *args): runs a compiled C++ kernel on neuron buffers, queued on their "
    "stream when execution is asynchronous"};

PyObject* one_item_call(PyObject* call, PyObject* args, PyObject* kwargs) {
  launch::ItemScope scope;  // closes (queuing what it collected) on return and on error
  return PyObject_Call(call, args, kwargs);
}

PyObject* as_one_item(PyObject* /*module*/, PyObject* call) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(PyCallable_Check(call), "as_one_item(call): call must be callable");
  static PyMethodDef def = {
      "call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(one_item_call)),
      METH_VARARGS | METH_KEYWORDS, "a compiled graph's call, queued as one item"};
  // The wrapped callable rides as the function's self.
  return PyCFunction_New(&def, call);
  END_HANDLE_TH_ERRORS
}

PyMethodDef kAsOneItem = {
    "as_one_item", as_one_item, METH_O,
    "as_one_item(call): a compiled graph's call whose queued work reaches its stream as one item"};

}  // namespace

std::optional<RecordedProgram> record_kernel_calls(PyObject* call, PyObject* tensors,
                                                   std::string& why) {
  TORCH_CHECK_TYPE(PyList_Check(tensors), "record_kernel_calls: tensors must be a list");
  Recording recording;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(tensors); ++i) {
    PyObject* t = PyList_GET_ITEM(tensors, i);
    TORCH_CHECK_TYPE(THPVariable_Check(t) && THPVariable_Unpack(t).is_privateuseone(),
                     "record_kernel_calls: tensors must hold neuron tensors");
    recording.tensors.push_back(THPVariable_Unpack(t));
  }
  // The boxed call may empty the list it gets: it gets a copy.
  PyObject* copy = PyList_GetSlice(tensors, 0, PyList_GET_SIZE(tensors));
  if (copy == nullptr) throw python_error();
  const std::uint64_t work_before = launch::work_count();
  t_recording = &recording;
  PyObject* result = PyObject_CallOneArg(call, copy);
  t_recording = nullptr;
  Py_DECREF(copy);
  if (result == nullptr) throw python_error();
  Py_DECREF(result);
  if (!recording.failure.empty()) {
    why = recording.failure;
  } else if (launch::work_count() != work_before) {
    why = "the graph runs device work besides its C++ kernels";
  } else if (recording.program.calls.empty()) {
    why = "the graph launches no kernel";
  } else {
    return std::move(recording.program);
  }
  return std::nullopt;
}

void call_recorded(const RecordedCall& call, const std::uintptr_t* args) {
  kRawCalls[call.buffer.size()](call.entry, args);
}

PyObject* launch_function() { return PyCFunction_New(&kLaunch, nullptr); }
PyObject* as_one_item_function() { return PyCFunction_New(&kAsOneItem, nullptr); }

}  // namespace torchneuron
