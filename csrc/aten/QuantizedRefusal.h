// Quantized tensors are refused on neuron (why: QuantizedRefusal.cpp). The fallback calls this
// for a CPU kernel that returned a quantized tensor from neuron inputs (quantize_per_tensor),
// which would otherwise become a neuron tensor of a quantized dtype without its quantizer.
#pragma once

#include <ATen/core/operator_name.h>

namespace torchneuron {

[[noreturn]] void refuse_quantized(const c10::OperatorName& op);

}  // namespace torchneuron
