// How torch.compile's generated wrapper launches its C++ kernels on neuron buffers, and how a
// whole compiled graph reaches the device as one queued item (KernelLaunch.cpp).
#pragma once

#include <Python.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torchneuron {

// `launch_neuron(kernel, *args)` as a bare CPython function (new reference): runs the compiled
// C++ kernel now when execution is synchronous, else queues it on the current stream of its
// neuron buffers, after the work already queued there.
PyObject* launch_function();
// `as_one_item(call)` (new reference): wraps a compiled graph's `call(args)` so that the work it
// queues (its kernels and the extern ops it dispatches) reaches the stream as one item.
PyObject* as_one_item_function();

// One kernel call of a compiled graph, as fused eager replays it without Python
// (csrc/fused_eager/): the kernel's C entry point and, per argument, a buffer and a byte
// offset into it (its pointer is passed) or an integer passed by value.
struct RecordedCall {
  void* entry = nullptr;
  std::vector<int> buffer;            // per argument: the buffer, or -1 for an integer
  std::vector<std::uintptr_t> value;  // per argument: the byte offset, or the integer
};
// A graph's kernel calls over its buffers: first the tensors it was called with, then scratch
// buffers of these sizes that the graph allocated itself (allocated again at every replay).
struct RecordedProgram {
  std::vector<RecordedCall> calls;
  std::vector<std::size_t> scratch_nbytes;
};
// Calls a compiled graph's boxed `call(list)` with `tensors` (a list of neuron tensors) while its
// kernel launches are recorded instead of run. Returns them when the graph did nothing but
// launch C++ kernels on those tensors, buffers of its own and integers; otherwise nullopt, with
// the reason in `why`. Needs the GIL.
std::optional<RecordedProgram> record_kernel_calls(PyObject* call, PyObject* tensors,
                                                   std::string& why);
// Calls a recorded kernel with its arguments resolved (pointers and integers), GIL-free.
void call_recorded(const RecordedCall& call, const std::uintptr_t* args);

}  // namespace torchneuron
