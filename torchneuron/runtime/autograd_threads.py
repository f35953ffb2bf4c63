"""Backward on the calling thread.

PyTorch's autograd engine hands the backward work of every non-CPU device to a per-device
worker thread and makes the caller wait for it, so that CUDA kernels can be queued while the
caller goes on. On neuron the device's own stream queues do that (NEURON_EAGER_MODE=async,
csrc/runtime/Execution.h; in sync mode kernels complete before the call returns), so
the hand-off buys nothing and costs a thread wake-up per `backward()` (measured at ~100 us on
2.13, the dominant cost of a small model's training step). With autograd multithreading off,
the engine runs neuron backward work on the calling thread's CPU ready queue instead; results
are identical. The switch is PyTorch's own (`torch.autograd.set_multithreading_enabled`) and is
thread-local, so it is set for the importing (main) thread; threads that run their own training
loops may use the same context manager.
"""

import torch


def run_backward_on_calling_thread() -> None:
    # internal: see runtime/torch_internals.py "torch._C._set_multithreading_enabled"
    torch._C._set_multithreading_enabled(False)
