// When a native kernel may run the CPU backend's kernel on the neuron tensors themselves (their
// memory is host memory on the software NeuronCore), skipping the fallback's CPU aliases and
// adoption. Every other case goes through the fallback, which handles all of them and raises
// what it must (devices, the float64 policy, a runtime without host access).
#pragma once

#include "aten/Float64Gate.h"
#include "aten/HostAccess.h"

#include <ATen/core/Tensor.h>

#include <initializer_list>

namespace torchneuron {

// Every operand a defined, strided neuron tensor, all on one device and of one dtype that a
// fast path may compute in, on a runtime whose memory the CPU can address.
inline bool cpu_kernel_takes(std::initializer_list<const at::Tensor*> operands) {
  if (!host_addressable()) return false;
  c10::DeviceIndex device = -1;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  for (const at::Tensor* t : operands) {
    if (!t->defined() || t->device().type() != c10::DeviceType::PrivateUse1 ||
        t->layout() != c10::kStrided) {
      return false;
    }
    if (device < 0) {
      device = t->device().index();
      dtype = t->scalar_type();
    } else if (t->device().index() != device || t->scalar_type() != dtype) {
      return false;
    }
  }
  return fast_path_dtype(dtype);
}

}  // namespace torchneuron
