// Native neuron kernels for mm, addmm and bmm (functional and out=), the products every Linear
// layer, attention block and compiled graph (Inductor's extern kernels call their out= forms)
// runs. Their CPU kernels work on data pointers (BLAS / oneDNN) and reach other tensors only
// through dispatched calls (resize_, copy_, contiguous), so they run on the neuron tensors
// themselves, whose memory is host memory on the software NeuronCore: the kernel redispatches
// to the CPU key with the neuron tensors, and skips the fallback's CPU aliases and adoption.
//
// The CPU kernel checks shapes and dtypes (with the CPU's messages) but not devices, and it does
// not know the device's float64 policy: only operands that are all neuron tensors of one
// device, strided, of one dtype other than float64 take this path, and only dtypes for which
// the CPU kernel never reaches oneDNN (see blas_matmul_dtype); the fallback takes every other
// case and raises what it must.
#include "aten/Fallback.h"
#include "aten/native/FastPath.h"
#include "profiler/KernelActivity.h"

#include <ATen/Functions.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/mm_ops.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include <initializer_list>

namespace torchneuron {
namespace {

const c10::DispatchKeySet kCpuKernel(c10::DispatchKey::CPU);

bool blas_takes(std::initializer_list<const at::Tensor*> operands) {
  return cpu_kernel_takes(operands) && blas_matmul_dtype((*operands.begin())->scalar_type());
}

// The result the CPU's functional kernel allocates: contiguous, the first operand's options.
at::Tensor new_result(c10::IntArrayRef sizes, const at::Tensor& like) {
  return new_device_tensor(sizes, c10::contiguous_strides(sizes), like.scalar_type(),
                           like.device().index());
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (blas_takes({&self, &mat2, &out})) {
    return profiler::run_recorded("aten::mm", {&self, &mat2}, [&]() -> decltype(auto) {
      launch::InlineScope in_place;  // its nested copy_/resize_ run here, in order
      return at::_ops::mm_out::redispatch(kCpuKernel, self, mat2, out);
    });
  }
  call_through_fallback("aten::mm", "out", self, mat2, out);
  return out;
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  if (blas_takes({&self, &mat2}) && self.dim() == 2 && mat2.dim() == 2) {
    at::Tensor out = new_result({self.size(0), mat2.size(1)}, self);
    return profiler::run_recorded("aten::mm", {&self, &mat2}, [&]() -> decltype(auto) {
      launch::InlineScope in_place;  // its nested copy_/resize_ run here, in order
      return at::_ops::mm_out::redispatch(kCpuKernel, self, mat2, out);
    });
  }
  return call_through_fallback("aten::mm", "", self, mat2);
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  if (blas_takes({&self, &mat1, &mat2, &out})) {
    return profiler::run_recorded("aten::addmm", {&self, &mat1, &mat2}, [&]() -> decltype(auto) {
      launch::InlineScope in_place;  // its nested copy_/resize_ run here, in order
      return at::_ops::addmm_out::redispatch(kCpuKernel, self, mat1, mat2, beta, alpha, out);
    });
  }
  call_through_fallback("aten::addmm", "out", self, mat1, mat2, beta, alpha, out);
  return out;
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const c10::Scalar& beta, const c10::Scalar& alpha) {
  if (blas_takes({&self, &mat1, &mat2}) && mat1.dim() == 2 && mat2.dim() == 2) {
    at::Tensor out = new_result({mat1.size(0), mat2.size(1)}, mat1);
    return profiler::run_recorded("aten::addmm", {&self, &mat1, &mat2}, [&]() -> decltype(auto) {
      launch::InlineScope in_place;  // its nested copy_/resize_ run here, in order
      return at::_ops::addmm_out::redispatch(kCpuKernel, self, mat1, mat2, beta, alpha, out);
    });
  }
  return call_through_fallback("aten::addmm", "", self, mat1, mat2, beta, alpha);
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (blas_takes({&self, &mat2, &out})) {
    return profiler::run_recorded("aten::bmm", {&self, &mat2}, [&]() -> decltype(auto) {
      launch::InlineScope in_place;  // its nested copy_/resize_ run here, in order
      return at::_ops::bmm_out::redispatch(kCpuKernel, self, mat2, out);
    });
  }
  call_through_fallback("aten::bmm", "out", self, mat2, out);
  return out;
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  if (blas_takes({&self, &mat2}) && self.dim() == 3 && mat2.dim() == 3) {
    at::Tensor out = new_result({self.size(0), self.size(1), mat2.size(2)}, self);
    return profiler::run_recorded("aten::bmm", {&self, &mat2}, [&]() -> decltype(auto) {
      launch::InlineScope in_place;  // its nested copy_/resize_ run here, in order
      return at::_ops::bmm_out::redispatch(kCpuKernel, self, mat2, out);
    });
  }
  return call_through_fallback("aten::bmm", "", self, mat2);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", mm);
  m.impl("mm.out", mm_out);
  m.impl("addmm", addmm);
  m.impl("addmm.out", addmm_out);
  m.impl("bmm", bmm);
  m.impl("bmm.out", bmm_out);
}

}  // namespace torchneuron
