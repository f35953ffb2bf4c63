// torch.histc accepts integer tensors on CUDA but not on the CPU, and code written for
// accelerators relies on it: transformers' grouped MoE experts (Mixtral, Qwen-MoE, DeepSeek...)
// count tokens per expert with histc on int32 on every device except CPU and MPS. Neuron follows
// CUDA: integer inputs are binned in double (exact for every int32 and for int64 below 2^53) and
// the counts come back in the input's dtype, as on CUDA. Floating inputs run the CPU kernel.
#include "aten/CpuAlias.h"

#include <ATen/Functions.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  AliasSession s(self.device().index());
  at::Tensor in = s.to_cpu(self);
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    return s.to_neuron(at::histc(in, bins, min, max));
  }
  at::Tensor counts = at::histc(in.to(at::kDouble), bins, min, max);
  return s.to_neuron(counts.to(self.scalar_type()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", histc);
}

}  // namespace torchneuron
