// The allocation torch.compile's generated wrapper makes for every neuron buffer:
// `empty_strided_neuron(size, stride, dtype)` on the current device. It is Inductor's
// empty_strided_cpu / empty_strided_cuda for neuron: no Python argument parser and no dispatcher
// between the wrapper and the caching allocator, because a wrapper allocates many buffers per
// call and its Python overhead is what compiled code pays on top of the kernels.
#include "compile/CompileAllocation.h"

#include "device/NeuronAllocator.h"

#include <ATen/EmptyTensor.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

namespace torchneuron {
namespace {

using Dims = c10::SmallVector<int64_t, 8>;

Dims int_tuple(PyObject* obj, const char* what) {
  TORCH_CHECK_TYPE(PyTuple_Check(obj), "empty_strided_neuron: ", what,
                   " must be a tuple of ints, got ", Py_TYPE(obj)->tp_name);
  const Py_ssize_t n = PyTuple_GET_SIZE(obj);
  Dims out(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(obj, i);
    TORCH_CHECK_TYPE(PyLong_Check(item), "empty_strided_neuron: ", what,
                     " must be a tuple of ints, got a ", Py_TYPE(item)->tp_name, " at index ", i);
    out[i] = PyLong_AsLongLong(item);
    if (out[i] == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      PyErr_Format(PyExc_OverflowError, "empty_strided_neuron: %s[%zd] does not fit in 64 bits",
                   what, i);
      throw python_error();
    }
  }
  return out;
}

PyObject* empty_strided_neuron(PyObject* /*module*/, PyObject* args) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(PyTuple_GET_SIZE(args) == 3, "empty_strided_neuron(size, stride, dtype) "
                   "takes 3 positional arguments, got ", PyTuple_GET_SIZE(args));
  const Dims size = int_tuple(PyTuple_GET_ITEM(args, 0), "size");
  const Dims stride = int_tuple(PyTuple_GET_ITEM(args, 1), "stride");
  PyObject* dtype = PyTuple_GET_ITEM(args, 2);
  TORCH_CHECK_TYPE(THPDtype_Check(dtype), "empty_strided_neuron: dtype must be a torch.dtype, "
                   "got ", Py_TYPE(dtype)->tp_name);
  TORCH_CHECK_VALUE(size.size() == stride.size(), "empty_strided_neuron: size has ", size.size(),
                    " dimensions but stride has ", stride.size());
  return THPVariable_Wrap(at::detail::empty_strided_generic(
      size, stride, &neuron_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      reinterpret_cast<THPDtype*>(dtype)->scalar_type));
  END_HANDLE_TH_ERRORS
}

PyMethodDef kEmptyStrided = {
    "empty_strided", empty_strided_neuron, METH_VARARGS,
    "empty_strided(size, stride, dtype): an uninitialized neuron tensor on the current device "
    "(the buffer allocation of torch.compile's generated code)"};

}  // namespace

PyObject* empty_strided_function() { return PyCFunction_New(&kEmptyStrided, nullptr); }

}  // namespace torchneuron
