// Ops whose only kernel is a composite that calls a CPU/CUDA DispatchStub directly with the
// tensor's own device (no redispatch): on neuron that stub has no kernel and PyTorch fails an
// internal assert. They run on CPU aliases of the neuron memory, like every fallback op.
// conj_physical_: also behind complex svd/linalg_svd with out= tensors. mode.values (mode's out=
// form) checks the device itself first ("mode only supports CPU, CUDA and XPU device type").
// Composites that branch on the device type take the CPU's branch only with CPU tensors, so they
// run on aliases too: ldexp computes with exp2 on the CPU and with mul(pow(2, other)) elsewhere
// (other dtypes accepted, other float16 roundings).
#include "aten/CpuAlias.h"
#include "aten/Fallback.h"

#include <ATen/Functions.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

at::Tensor& conj_physical_(at::Tensor& self) {
  AliasSession session(self.device().index());
  session.to_cpu(self).conj_physical_();
  session.sync_back();
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("conj_physical_", conj_physical_);
  for (const char* op : {"mode.values", "ldexp.Tensor", "ldexp_", "ldexp.out"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
  }
}

}  // namespace torchneuron
