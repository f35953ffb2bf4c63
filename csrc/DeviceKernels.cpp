// Ops whose neuron semantics differ from "run the CPU kernel on aliases": convolution (a
// non-CPU tensor routes to convolution_overrideable, which the CPU does not implement) and
// dropout (its CPU kernel draws from the CPU generator; on neuron it must draw from the
// neuron device's generator).
#include "CpuAlias.h"

#include <ATen/Functions.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                       c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                       c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  AliasSession s(input.device().index());
  std::optional<at::Tensor> bias_cpu;
  if (bias.has_value() && bias->defined()) bias_cpu = s.to_cpu(*bias);
  at::Tensor out = at::convolution_symint(s.to_cpu(input), s.to_cpu(weight), bias_cpu, stride,
                                          padding, dilation, transposed, output_padding,
                                          std::move(groups));
  return s.to_neuron(out);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  AliasSession s(input.device().index());
  // The bias gradient has one entry per output channel.
  std::vector<c10::SymInt> bias_sizes;
  if (output_mask[2]) {
    bias_sizes.push_back(transposed ? weight.sym_size(1) * groups : weight.sym_size(0));
  }
  auto [gi, gw, gb] = at::convolution_backward_symint(
      s.to_cpu(grad_output), s.to_cpu(input), s.to_cpu(weight),
      output_mask[2] ? std::optional<c10::SymIntArrayRef>(bias_sizes) : std::nullopt, stride,
      padding, dilation, transposed, output_padding, std::move(groups), output_mask);
  return {s.to_neuron(gi), s.to_neuron(gw), s.to_neuron(gb)};
}

// Same arithmetic as the CPU's native_dropout; the mask comes from bernoulli_ on a neuron
// tensor, which the fallback feeds from the neuron generator.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input)};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double keep = 1.0 - p;
  const double scale = keep == 0 ? 0.0 : 1.0 / keep;
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool)).bernoulli_(keep);
  at::Tensor output = input.mul(mask).mul_(scale);
  return {output, mask};
}

// scaled_dot_product_attention asks this stub which fused kernel to use. Without it neuron
// would take the slow unfused math path; with it, it picks what the CPU picks for the same
// inputs, and the chosen kernel (e.g. _scaled_dot_product_flash_attention_for_cpu) runs through
// the fallback, so results are the CPU's bit for bit.
int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  AliasSession s(query.device().index());
  // The CPU's choice depends on requires_grad (flash has no gradient for a learned mask, e.g.
  // T5's position bias), which fresh aliases lack: carry it over. A fresh alias is a leaf, so
  // the flag is set on it directly.
  auto alias = [&s](const at::Tensor& t) {
    at::Tensor a = s.to_cpu(t);
    if (t.requires_grad() && a.is_floating_point()) a.requires_grad_(true);
    return a;
  };
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
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
  m.impl("native_dropout", native_dropout);
  // SDPA asks through the dispatcher op too; the boxed fallback would answer without requires_grad.
  m.impl("_fused_sdp_choice", fused_sdp_choice);
}

}  // namespace torchneuron
