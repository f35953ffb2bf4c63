// The allocation torch.compile's generated wrapper makes for every neuron buffer
// (CompileAllocation.cpp).
#pragma once

#include <Python.h>

namespace torchneuron {

// `empty_strided_neuron(size, stride, dtype)` as a bare CPython function (new reference).
PyObject* empty_strided_function();

}  // namespace torchneuron
