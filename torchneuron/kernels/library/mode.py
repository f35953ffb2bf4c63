"""Which implementation the library's ops run: NEURON_KERNEL_MODE, read by the configuration
module. `fast` (the default) runs each op as composite PyTorch ops on the device, so turning
the library on never costs a model time; `simulate` runs the op's @nki.jit kernels on the
software NeuronCore's NKI simulator, to validate the kernels inside a real model."""

from __future__ import annotations

import torch

from ...runtime import config


def kernel_mode() -> str:
    return config.current().kernel_mode


def simulating() -> bool:
    return kernel_mode() == "simulate"


def eager_fast() -> bool:
    """True when an op's public function should skip its custom operator: fast mode outside a
    torch.compile trace. A torch.library custom op costs ~70 us a call in eager (its autograd
    wrapper, redispatch and Dynamo guard), more than most of these ops take at model sizes, and
    buys nothing there; compiled graphs keep the op (one node, no graph break) and simulate mode
    needs it to reach the NKI kernels."""
    return not torch.compiler.is_compiling() and not simulating()
