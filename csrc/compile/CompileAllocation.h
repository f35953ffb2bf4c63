// What torch.compile's generated wrapper calls to allocate neuron buffers, as a bare CPython
// function (CompileAllocation.cpp); its kernel launches are in KernelLaunch.h.
#pragma once

#include <Python.h>

namespace torchneuron {

// `empty_strided_neuron(size, stride, dtype)` as a bare CPython function (new reference).
PyObject* empty_strided_function();

}  // namespace torchneuron
