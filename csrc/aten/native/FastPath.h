// When a native kernel may run the CPU backend's kernel on the neuron tensors themselves (their
// memory is host memory on the software NeuronCore), skipping the fallback's CPU aliases and
// adoption. Every other case goes through the fallback, which handles all of them and raises
// what it must (devices, the float64 policy, a runtime without host access).
#pragma once

#include "aten/Accounting.h"
#include "aten/Float64Gate.h"
#include "aten/HostAccess.h"
#include "aten/Launch.h"
#include "runtime/ProtectedMemory.h"

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <initializer_list>

namespace torchneuron {

// A fast path runs on the calling thread: only when the runtime's memory is host-addressable and
// the launch decision (aten/Launch.h) runs the op inline. Every other case goes to the fallback,
// which queues or holds it. While the readiness accounting is on, every op goes to the fallback,
// which counts each call once, under the op's own name (aten/Accounting.h). Under
// NEURON_MEMORY_PROTECT=1 too: the fallback runs every kernel inside a kernel scope, whose window
// makes the memory accessible (runtime/ProtectedMemory.h); a fast path opens none.
inline bool fast_path_now(std::initializer_list<const at::Tensor*> operands) {
  if (!host_addressable() || accounting::enabled() || rt::memory_protected()) return false;
  std::size_t largest = 0;
  if (launch::queuing()) {  // synchronous: no operand sizes to weigh on the hot path
    for (const at::Tensor* t : operands) {
      if (t->defined()) largest = std::max<std::size_t>(largest, t->numel() * t->itemsize());
    }
  }
  return launch::decide(launch::Work::kOp, largest) == launch::Launch::kInline;
}

// Every operand a defined, strided neuron tensor, all on one device and of one dtype that a
// fast path may compute in, on a runtime whose memory the CPU can address.
inline bool cpu_kernel_takes(std::initializer_list<const at::Tensor*> operands) {
  if (!fast_path_now(operands)) return false;
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

// A new neuron tensor on `device`, as `at::empty_strided` makes it (the deterministic fill
// included) without a trip through the dispatcher: a fast path's result.
at::Tensor new_device_tensor(c10::IntArrayRef size, c10::IntArrayRef stride,
                             c10::ScalarType dtype, c10::DeviceIndex device);

// A dtype whose CPU matmul kernel (mm/addmm/bmm) calls BLAS or ATen's own loops on raw pointers.
// bfloat16 and float16 (and float32 when torch.backends.mkldnn's matmul precision is bf16/tf32)
// go to oneDNN, which rejects tensors that are not CPU tensors, and ATen's CPU kernel answers
// that by turning torch.backends.mkldnn off for the whole process: those take the fallback, whose
// CPU aliases are CPU tensors.
inline bool blas_matmul_dtype(c10::ScalarType t) {
  if (t == c10::kFloat) {
    const auto precision = at::globalContext().float32Precision(at::Float32Backend::MKLDNN,
                                                                at::Float32Op::MATMUL);
    return precision != at::Float32Precision::BF16 && precision != at::Float32Precision::TF32;
  }
  return t == c10::kComplexFloat || c10::isIntegralType(t, /*includeBool=*/false);
}

}  // namespace torchneuron
