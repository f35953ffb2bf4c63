// The boxed fallback (Fallback.cpp), callable from native kernels that take a fast path only
// for some inputs and hand every other case to the fallback, which handles all of them.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torchneuron {

// Runs `op` on the stack's arguments as the CPU kernel on CPU aliases of neuron memory.
void run_cpu_kernel_on_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace torchneuron
