// Native neuron kernels for fill_ and zero_, behind every torch.zeros / ones / full / *_like and
// every zero_grad(set_to_none=False). They do what the CPU's kernels do, on neuron memory (host
// memory on the software NeuronCore): one element is written directly, small dense tensors are
// memset to zero, everything else runs the CPU implementation of fill_stub on a TensorIterator
// over the neuron tensor. Through the fallback each cost a CPU alias and a boxed call.
#include "aten/CpuStubs.h"  // first: before any ATen header
#include "aten/CpuAlias.h"
#include "aten/Fallback.h"
#include "aten/native/FastPath.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Fill.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <cstring>

namespace torchneuron {
namespace {

// The dtypes a one-element fill writes itself (AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND(kBool)'s):
// not the reduced floating types, whose conversion differs, nor the barebones unsigned ones.
bool written_directly(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: case c10::kDouble: case c10::kComplexFloat: case c10::kComplexDouble:
    case c10::kByte: case c10::kChar: case c10::kShort: case c10::kInt: case c10::kLong:
    case c10::kBool:
      return true;
    default:
      return false;
  }
}

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  if (!fast_path_now({&self})) {  // the fallback queues it, or names the missing host access
    call_through_fallback("aten::fill_", "Scalar", self, value);
    return self;
  }
  if (self.numel() == 1) {
    // The CPU fills one element its own way (ATen's scalar_fill: `*ptr = value.to<T>()`). For
    // the reduced floating types (float16, bfloat16, float8) that is a conversion libtorch does
    // not export (a value out of range becomes inf or saturates there, where the iterator's
    // kernel below raises), so the CPU's fill_ runs on an alias; the common types are written
    // here as scalar_fill writes them (a 0-dim fill: every backward() starts with one).
    const c10::ScalarType dtype = self.scalar_type();
    if (written_directly(dtype) && fast_path_dtype(dtype)) {
      AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND(c10::kBool, dtype, "neuron_fill_one", [&] {
        *static_cast<scalar_t*>(self.data_ptr()) = value.to<scalar_t>();
      });
      return self;
    }
    AliasSession session(self.device().index());
    at::Tensor alias = session.to_cpu(self);
    at::_ops::fill__Scalar::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), alias, value);
    return self;
  }
  launch::InlineScope in_place;
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)  // filling is idempotent, as on the CPU
                  .check_all_same_dtype(false)
                  .add_output(self)
                  .resize_outputs(false)
                  .build();
  at::native::fill_stub(c10::kCPU, iter, value);
  return self;
}

at::Tensor& zero(at::Tensor& self) {
  const int64_t numel = c10::multiply_integers(self.sizes());
  // The CPU's shortcut for small dense tensors (below the grain size where its fill would run
  // in parallel): a memset of the bytes the tensor spans.
  if (fast_path_now({&self}) && self.is_non_overlapping_and_dense() &&
      numel < at::internal::GRAIN_SIZE && self.data_ptr() != nullptr) {
    if (numel > 0) std::memset(self.data_ptr(), 0, numel * self.dtype().itemsize());
    return self;
  }
  return fill_scalar(self, 0);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("zero_", zero);
}

}  // namespace torchneuron
