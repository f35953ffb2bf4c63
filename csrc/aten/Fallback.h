// The boxed fallback (Fallback.cpp), callable from native kernels that take a fast path only
// for some inputs and hand every other case to the fallback, which handles all of them.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace torchneuron {

// Runs `op` on the stack's arguments as the CPU kernel on CPU aliases of neuron memory. A boxed
// kernel: register it with torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>().
void neuron_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                     torch::jit::Stack* stack);

class AliasSession;
// The fallback's kernel call, for a stack it already checked: runs the CPU kernel on CPU aliases
// made in `session` (whose device the op runs on) and leaves the CPU results on the stack.
void run_cpu_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                    torch::jit::Stack* stack, AliasSession& session);

// Registers the fallback as the neuron kernel of the ops the dispatcher would otherwise decompose
// although the CPU has a kernel for them (see Fallback.cpp); once, at import; returns their names.
std::vector<std::string> route_to_cpu_kernels();

// Runs the ATen op `name`.`overload` on `args` through the fallback; returns its (first) result.
template <typename... Args>
at::Tensor call_through_fallback(const char* name, const char* overload, const Args&... args) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  torch::jit::Stack stack;
  stack.reserve(sizeof...(Args));
  (stack.emplace_back(args), ...);
  neuron_fallback(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
  return std::move(stack.back()).toTensor();
}

}  // namespace torchneuron
