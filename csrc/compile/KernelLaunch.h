// How torch.compile's generated wrapper launches its C++ kernels on neuron buffers, and how a
// whole compiled graph reaches the device as one queued item (KernelLaunch.cpp).
#pragma once

#include <Python.h>

namespace torchneuron {

// `launch_neuron(kernel, *args)` as a bare CPython function (new reference): runs the compiled
// C++ kernel now when execution is synchronous, else queues it on the current stream of its
// neuron buffers, after the work already queued there.
PyObject* launch_function();
// `as_one_item(call)` (new reference): wraps a compiled graph's `call(args)` so that the work it
// queues (its kernels and the extern ops it dispatches) reaches the stream as one item.
PyObject* as_one_item_function();

}  // namespace torchneuron
