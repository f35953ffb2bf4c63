"""Which implementation the library's ops run: NEURON_KERNEL_MODE, read by the configuration
module. `fast` (the default) runs each op as composite PyTorch ops on the device, so turning
the library on never costs a model time; `simulate` runs the op's @nki.jit kernels on the
software NeuronCore's NKI simulator, to validate the kernels inside a real model."""

from __future__ import annotations

from ...runtime import config


def kernel_mode() -> str:
    return config.current().kernel_mode


def simulating() -> bool:
    return kernel_mode() == "simulate"
