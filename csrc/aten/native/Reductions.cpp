// A native neuron kernel for sum over dims (sum.dim_IntList; the full sum, sum.default, is
// PyTorch's composite over it): a loss's `.sum()`, and the bias gradient of every Linear layer
// (autograd's sum_to_size). Through the boxed fallback a small sum pays ~3,500 instructions for
// CPU aliases and the adoption of its result. Here the CPU backend's reduction kernel (sum_stub,
// asked for its CPU implementation) runs on a reduction TensorIterator over the neuron tensors
// themselves, whose memory is host memory on the software NeuronCore, into a result allocated as
// the CPU's functional kernel allocates it: the same kernel, the same summation order, so the
// same bits as the CPU.
//
// Only the common case takes this path: float32 or float64 operands (a fast-path dtype; the CPU
// reduces float16/bfloat16 through a path of its own) whose sum keeps their dtype (no dtype=
// conversion), at least one element. Integer sums (which promote to int64), conversions, empty
// tensors, bad dims and everything else go to the fallback, which raises the CPU's errors.
#include "aten/CpuStubs.h"  // first: before any ATen header
#include "aten/Fallback.h"
#include "aten/native/FastPath.h"
#include "profiler/KernelActivity.h"

#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include <algorithm>
#include <bitset>
#include <optional>

namespace torchneuron {
namespace {

bool sum_takes(const at::Tensor& self, at::OptionalIntArrayRef dim,
               std::optional<c10::ScalarType> dtype) {
  const c10::ScalarType t = self.scalar_type();
  if (!cpu_kernel_takes({&self}) || (t != c10::kFloat && t != c10::kDouble) ||
      (dtype && *dtype != self.scalar_type()) || self.numel() == 0) {
    return false;
  }
  if (dim) {
    // Every dim in range and none twice; anything else is the fallback's to refuse.
    std::bitset<at::dim_bitset_size> seen;
    const int64_t ndim = self.dim();
    for (int64_t d : *dim) {
      if (d < -std::max<int64_t>(ndim, 1) || d >= std::max<int64_t>(ndim, 1)) return false;
      const int64_t wrapped = d < 0 ? d + std::max<int64_t>(ndim, 1) : d;
      if (wrapped >= static_cast<int64_t>(seen.size()) || seen[wrapped]) return false;
      seen.set(wrapped);
    }
  }
  return true;
}

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  if (!sum_takes(self, dim, dtype)) {
    return call_through_fallback("aten::sum", "dim_IntList", self, dim, keepdim, dtype);
  }
  return profiler::run_recorded("aten::sum", {&self}, [&]() -> at::Tensor {
    launch::InlineScope in_place;  // the iterator's nested calls run here, in order
    const int64_t ndim = self.dim();
    const at::native::DimMask mask = at::native::make_dim_mask(dim, ndim);
    const at::DimVector shape = at::native::shape_from_dim_mask(self, mask, keepdim);
    at::Tensor result = new_device_tensor(shape, c10::contiguous_strides(shape),
                                          self.scalar_type(), self.device().index());
    at::Tensor viewed = at::native::review_reduce_result(result, ndim, mask, keepdim);
    auto iter = at::TensorIterator::reduce_op(viewed, self);
    at::native::sum_stub(c10::kCPU, iter);
    return result;
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", sum_dim);
}

}  // namespace torchneuron
