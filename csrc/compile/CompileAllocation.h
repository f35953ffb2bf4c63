// What torch.compile's generated wrapper calls for neuron buffers, as bare CPython functions:
// their allocation and the wait before a C++ kernel touches them (CompileAllocation.cpp).
#pragma once

#include <Python.h>

namespace torchneuron {

// `empty_strided_neuron(size, stride, dtype)` as a bare CPython function (new reference).
PyObject* empty_strided_function();
// `settle_neuron()`, called by generated code before each of its C++ kernels, which read and
// write neuron memory from the calling thread: waits for queued eager work (asynchronous
// execution; the graph's extern kernels, aten ops, may be queued). One atomic load when idle.
PyObject* settle_function();

}  // namespace torchneuron
