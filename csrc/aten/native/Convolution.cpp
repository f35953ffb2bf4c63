// Convolution on a non-CPU tensor routes to convolution_overrideable (and its backward), which
// the CPU does not implement: on neuron both run the CPU's convolution on CPU aliases, so results
// are the CPU's bit for bit.
#include "aten/CpuAlias.h"

#include <ATen/Functions.h>
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

}  // namespace torchneuron
