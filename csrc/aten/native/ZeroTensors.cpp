// Autograd's efficient zero tensors (`_efficientzerotensor`, e.g. the gradient of sgn on real
// inputs): tensors with the ZeroTensor key and no memory, which PyTorch's ZeroTensor fallback
// materializes when an op needs their values. Through the CPU fallback the kernel built a CPU
// ZeroTensor whose empty storage then became a plain neuron tensor without the key, and reading
// it (a copy to CPU) dereferenced null. Like CUDA, neuron builds them itself, keeping the key.
#include "device/CurrentDevice.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

at::Tensor efficient_zero_tensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout> /*layout*/,
                                 std::optional<c10::Device> device,
                                 std::optional<bool> /*pin_memory*/) {
  c10::Device d = device.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  if (!d.has_index()) d.set_index(current_device());
  at::native::ZeroTensorAllocator allocator(d);
  const auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) |
                    c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, c10::dtype_or_default(dtype),
                                   std::nullopt);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_efficientzerotensor", efficient_zero_tensor);
}

}  // namespace torchneuron
