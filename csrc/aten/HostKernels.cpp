#include "aten/HostKernels.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>

#include "aten/HostAccess.h"
#include "aten/OpWalk.h"
#include "aten/Launch.h"

namespace torchneuron {
namespace {

// The catch-all kernel, after the queued work it may read: the CPU key's dispatch-table entry
// is the catch-all for an op with no CPU kernel of its own.
void run_after_queued_work(const c10::OperatorHandle& op, c10::DispatchKeySet,
                           torch::jit::Stack* stack) {
  require_host_access(op.schema().name().c_str());
  launch::InlineScope in_place;
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

}  // namespace

std::vector<std::string> guard_host_kernels(const std::string& ns) {
  static std::vector<std::unique_ptr<torch::Library>> libraries;  // registrations live on
  torch::Library* neuron = nullptr;
  torch::Library* autograd = nullptr;
  std::vector<std::string> guarded;
  const bool known = for_each_op_in(ns, [&](const c10::OperatorHandle& op,
                                            std::string short_name) {
    if (!op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        op.hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      return;
    }
    if (neuron == nullptr) {
      libraries.push_back(std::make_unique<torch::Library>(
          torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__));
      neuron = libraries.back().get();
      libraries.push_back(std::make_unique<torch::Library>(
          torch::Library::IMPL, ns, c10::DispatchKey::AutogradPrivateUse1, __FILE__, __LINE__));
      autograd = libraries.back().get();
    }
    neuron->impl(short_name.c_str(),
                 torch::CppFunction::makeFromBoxedFunction<&run_after_queued_work>());
    autograd->impl(short_name.c_str(),
                   torch::CppFunction::makeFromBoxedFunction<&run_after_queued_work>());
    guarded.push_back(ns + "::" + short_name);
  });
  TORCH_CHECK_VALUE(known, "guard_host_kernels: no operator is registered in the namespace '",
                    ns, "' (load the extension first).");
  return guarded;
}

}  // namespace torchneuron
