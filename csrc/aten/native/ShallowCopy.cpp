// `Module.to("neuron")` keeps each Parameter object (and so weight tying, and optimizers built
// before the move) only when `_has_compatible_shallow_copy_type(cpu_param, neuron_tensor)` is
// true: then it swaps the storage in with `param.data = ...`. ATen's own check lists only the
// built-in dense backends (CPU, CUDA, XPU, ...), not PrivateUse1, so without this kernel every
// parameter was replaced by a fresh one and tied weights (GPT-2's lm_head and wte) came apart on
// neuron. A neuron tensor is a plain strided TensorImpl like a CPU one, so the shallow copy that
// `.data =` does between them is as sound as it is between CPU and CUDA.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

bool is_dense_host_or_neuron(const at::Tensor& t) {
  return t.layout() == at::kStrided && (t.is_cpu() || t.is_privateuseone()) &&
         !t.unsafeGetTensorImpl()->is_python_dispatch();
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.key_set() == from.key_set()) return true;
  return is_dense_host_or_neuron(self) && is_dense_host_or_neuron(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

}  // namespace torchneuron
