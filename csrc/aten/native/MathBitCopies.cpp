// Copies of lazily conjugated or negated tensors (`x.conj()` of a complex tensor, `_neg_view`)
// across the device boundary. PyTorch's Conjugate/Negative fallbacks materialize such an
// argument with clone() before running an op, and clone() copies with copy_(), which for neuron
// calls _copy_from again: an endless recursion (a stack-overflow crash on `x.conj().cpu()`).
// Our _copy_from needs no materializing: the CPU aliases keep the conj/neg bits and the CPU copy
// kernel resolves them, as it does for two CPU tensors. So those keys pass straight through.
#include <torch/library.h>

namespace torchneuron {

TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torchneuron
