// scaled_dot_product_attention's kernel choice on neuron: what the CPU would choose for the same
// inputs (the chosen kernel then runs through the fallback).
#include "aten/CpuAlias.h"

#include <ATen/Functions.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

// scaled_dot_product_attention asks this stub which fused kernel to use. Without it neuron
// would take the slow unfused math path; with it, it picks what the CPU picks for the same
// inputs, and the chosen kernel (e.g. _scaled_dot_product_flash_attention_for_cpu) runs through
// the fallback, so results are the CPU's bit for bit.
int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  // The choice reads metadata only (shapes, strides, dtypes, requires_grad: flash has no
  // gradient for a learned mask, e.g. T5's position bias), so it runs on stand-ins: no memory
  // is touched, and under torch.compile / torch.export the fake tensors' symbolic sizes pass
  // through as they are.
  auto alias = [](const at::Tensor& t) { return cpu_metadata_stand_in(t); };
  std::optional<at::Tensor> mask_cpu;
  if (attn_mask.has_value() && attn_mask->defined()) mask_cpu = alias(*attn_mask);
  // Straight to the CPU kernel: torch.compile traces SDPA with fake tensors under a Python
  // mode, and a full dispatch would hand it these real aliases.
  return at::_ops::_fused_sdp_choice::redispatch(
      c10::DispatchKeySet(c10::DispatchKey::CPU), alias(query), alias(key), alias(value),
      mask_cpu, dropout_p, is_causal, scale, enable_gqa);
}

}  // namespace
}  // namespace torchneuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchneuron::fused_sdp_choice)
}  // namespace at::native

namespace torchneuron {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // SDPA asks through the dispatcher op too; the boxed fallback would answer without requires_grad.
  m.impl("_fused_sdp_choice", fused_sdp_choice);
}

}  // namespace torchneuron
