// The boxed fallback (Fallback.cpp), callable from native kernels that take a fast path only
// for some inputs and hand every other case to the fallback, which handles all of them.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torchneuron {

// Runs `op` on the stack's arguments as the CPU kernel on CPU aliases of neuron memory. A boxed
// kernel: register it with torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>().
void neuron_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                     torch::jit::Stack* stack);

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
