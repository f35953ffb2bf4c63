// Asynchronous execution of the boxed fallback's ops (device/ExecutionQueue.h).
//
// At the call, the op runs on meta tensors (PyTorch's meta functions: the CPU's own shape and
// dtype checks, with its error types), which gives its results' metadata; results that are
// arguments or views of arguments are those tensors, the others get neuron memory now. The CPU
// kernel then runs on the stream's worker, on CPU aliases of snapshots of the arguments (their
// metadata at the call), and writes its results into that memory (KernelScope's OutputBlocks:
// no copy when the kernel allocates them in one go, as structured kernels do).
//
// A random op reserves its draws at the call (the generator's offset moves on then, in call
// order), so queued and synchronous runs draw the same numbers.
//
// An op is run now instead (returns false) when its results cannot be known before it runs
// (nonzero, unique, item: no meta function), when it reads CPU tensors other than scalars, when
// it resizes or re-points an argument, or when it is not an aten op (a Python kernel on a worker
// would need the GIL the caller may hold).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torchneuron {

// Queues `op` (arguments checked by the fallback) on the current stream of `device` and leaves
// its results on the stack; false, with the stack untouched, when it must run now.
bool defer_op(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack,
              c10::DeviceIndex device);

}  // namespace torchneuron
