#include "aten/CapturedCall.h"

#include "aten/CpuAlias.h"
#include "aten/HostAccess.h"
#include "aten/IValueTensors.h"
#include "aten/KernelScope.h"
#include "profiler/KernelActivity.h"
#include "runtime/ProtectedMemory.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/copy_ops.h>
#include <c10/core/GradMode.h>
#include <c10/core/StorageImpl.h>

#include <memory>
#include <utility>

namespace torchneuron {
namespace {

// Everything a replay of the op needs, made at capture; a replay only reads it.
struct CapturedCall {
  c10::OperatorHandle op;
  c10::DeviceIndex device;
  bool grad_mode;
  torch::jit::Stack cpu_stack;  // the arguments, neuron tensors as CPU aliases
  c10::SmallVector<OutputBlocks::Block, 2> blocks;  // fresh results' memory (run_queued's rule)
  std::vector<at::Tensor> fresh;  // CPU aliases of the fresh results, in result order
  std::vector<c10::Storage> keep;  // the neuron memory the aliases point into

  void operator()() const {
    const c10::AutoGradMode caller_grad_mode(grad_mode);
    const auto& schema = op.schema();
    profiler::KernelActivityScope activity(schema.name(), device);
    if (activity.active()) activity.inputs(cpu_stack.data(), cpu_stack.size());
    torch::jit::Stack stack = cpu_stack;
    {
      const KernelScope scope(device);  // the kernel's allocations come from device memory
      const OutputBlocks targets(blocks);
      const at::AutoDispatchBelowADInplaceOrView below_autograd;
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
    }
    std::size_t next = 0;
    for (const c10::IValue& v : stack) {
      for_each_tensor(v, [&](const at::Tensor& produced) {
        TORCH_CHECK(next < fresh.size(), "neuron graph replay: ", schema.name(),
                    " returned more tensors than its meta function did at capture");
        const at::Tensor& target = fresh[next++];
        if (!target.defined() || !produced.defined()) return;
        if (produced.const_data_ptr() == target.const_data_ptr() &&
            produced.dtype() == target.dtype() && same_geometry(produced, target)) {
          return;  // written in place
        }
        // internal: see runtime/torch_internals.py "at::_ops::<op>::redispatch to the CPU key"
        at::_ops::copy_::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU),
                                    const_cast<at::Tensor&>(target), produced, false);
      });
    }
    if (activity.active()) {
      for (const at::Tensor& t : fresh) activity.outputs({&t});
    }
  }
};

}  // namespace

std::function<void()> prepare_captured_call(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                            c10::DeviceIndex device,
                                            const torch::jit::Stack& work_stack,
                                            const std::vector<Result>& results, bool grad_mode) {
  if (!host_addressable() || rt::memory_protected() ||
      ks.highestPriorityTypeId() != c10::DispatchKey::PrivateUse1) {
    return nullptr;
  }
  auto call = std::make_shared<CapturedCall>(CapturedCall{op, device, grad_mode, {}, {}, {}, {}});
  // One alias per neuron tensor (kernels tell in-place from out= by identity) and one CPU
  // storage per neuron storage, as AliasSession makes them per call.
  std::vector<std::pair<const c10::TensorImpl*, at::Tensor>> tensors;
  std::vector<std::pair<const c10::StorageImpl*, c10::Storage>> storages;
  bool general = false;
  auto alias = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) return t;
    if (t.layout() != c10::kStrided || !t.has_storage()) {
      general = true;
      return t;
    }
    for (const auto& [impl, cpu] : tensors) {
      if (impl == t.unsafeGetTensorImpl()) return cpu;
    }
    c10::Storage cpu_storage;
    for (const auto& [impl, cpu] : storages) {
      if (impl == t.storage().unsafeGetStorageImpl()) cpu_storage = cpu;
    }
    if (!cpu_storage) {
      void* data = const_cast<void*>(t.storage().data());
      cpu_storage = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
          c10::StorageImpl::use_byte_size_t(), t.storage().nbytes(),
          c10::DataPtr(data, c10::Device(c10::kCPU)), kernel_cpu_allocator(),
          /*resizable=*/false));
      storages.emplace_back(t.storage().unsafeGetStorageImpl(), cpu_storage);
      call->keep.push_back(t.storage());
    }
    at::Tensor cpu = tensor_over(cpu_storage, c10::DispatchKey::CPU, t);
    carry_requires_grad(t, cpu);
    tensors.emplace_back(t.unsafeGetTensorImpl(), cpu);
    return cpu;
  };
  for (const c10::IValue& v : work_stack) {
    if (v.isGenerator()) return nullptr;  // random: the general path reserves draws per replay
    if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
      call->cpu_stack.emplace_back(c10::Device(c10::kCPU));
    } else {
      call->cpu_stack.push_back(map_tensors(v, alias));
    }
  }
  for (const Result& r : results) {
    if (!r.fresh || !r.neuron.defined()) {
      call->fresh.emplace_back();
      continue;
    }
    call->fresh.push_back(alias(r.neuron));
    add_output_block(call->blocks, r.neuron.storage().mutable_data(), r.neuron.storage().nbytes());
  }
  if (general) return nullptr;
  return [call] { (*call)(); };
}

}  // namespace torchneuron
