// Dropout on neuron: the CPU's native_dropout kernel draws its mask from the CPU generator; on
// neuron it must come from the neuron device's generator.
#include <ATen/Functions.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", native_dropout);
}

}  // namespace torchneuron
