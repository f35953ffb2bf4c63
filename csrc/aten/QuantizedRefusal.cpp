// Quantized tensors on neuron: refused, by name, at the first op that would make or touch one.
//
// Why refuse: PyTorch 2.13 deprecates its quantized dtypes (qint8, quint8, qint32, ...) and
// their creation functions; the fallback's CPU aliases carry no quantizer, so running the CPU's
// quantized kernels would need a second alias machinery for a feature on its way out. Without
// this, PyTorch's own message ("Could not run 'aten::empty_quantized' with arguments from the
// 'Quantizedneuron' backend") names neither the cause nor the way out. Every op that creates or
// reads a quantized neuron tensor dispatches on QuantizedPrivateUse1: quantize_per_tensor on a
// neuron input (its CPU result is copied back through empty_quantized), .to("neuron") of a CPU
// quantized tensor, empty(dtype=torch.qint8, device="neuron").

#include "aten/QuantizedRefusal.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>
#include <torch/library.h>

namespace torchneuron {

void refuse_quantized(const c10::OperatorName& op) {
  C10_THROW_ERROR(NotImplementedError,
                  c10::str("quantized tensors are not supported on neuron (", op,
                           "): PyTorch deprecates its quantized dtypes; quantize and run "
                           "quantized ops on the CPU (tensor.cpu()), or keep the model in "
                           "bfloat16/float16 on neuron"));
}

namespace {

void refuse_quantized_op(const c10::OperatorHandle& op, torch::jit::Stack*) {
  refuse_quantized(op.schema().operator_name());
}

}  // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_quantized_op>());
}

}  // namespace torchneuron
