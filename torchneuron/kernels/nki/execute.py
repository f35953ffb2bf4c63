"""nki.execute (NKI 0.8): runs a kernel without a machine-learning framework, NumPy arrays in,
the kernel's return value out with its tensors as NumPy arrays.

On AWS it compiles the kernel into a NEFF and runs it on a NeuronCore; here the NeuronCore is the
software one of the `neuron` device, so each array is copied to a `neuron` tensor, the kernel runs
on those (a `kernel[2]` launch on two cores, as usual), and the returned tensors are copied back.
The reference documents the return value as the only result, so a kernel that writes into one of
its argument arrays is refused (rule `execute-arguments`) instead of guessing whether the write
reaches the caller's array; return the tensor instead.
"""

from __future__ import annotations

import numpy as np
import torch

from .arguments import tensors_in
from .errors import NkiTypeError, NkiValidationError
from .jit import Kernel
from .objects import attributes, is_object, with_attributes


def as_kernel(kernel) -> Kernel:
    """An @nki.jit kernel as it is, a plain Python function wrapped as one (as the docs allow)."""
    if isinstance(kernel, Kernel):
        return kernel
    if not callable(kernel):
        raise NkiTypeError(f"{kernel!r} is not a kernel: pass an @nki.jit kernel or a function")
    return Kernel(kernel)


def numpy_results(value):
    """A kernel's return value with its tensors as NumPy arrays (CPU torch tensors for dtypes
    NumPy lacks: bfloat16 and the float8 types)."""
    if isinstance(value, torch.Tensor):
        cpu = value.detach().cpu()
        try:
            return cpu.numpy()
        except TypeError:
            return cpu
    if isinstance(value, (list, tuple)):
        return type(value)(numpy_results(v) for v in value)
    if isinstance(value, dict):
        return {k: numpy_results(v) for k, v in value.items()}
    return value


def require_numpy(api: str, args, kwargs) -> list[np.ndarray]:
    """The tensor arguments of a framework-free call: NumPy arrays only."""
    found = list(tensors_in((args, kwargs)))
    for t in found:
        if isinstance(t, torch.Tensor):
            raise NkiTypeError(f"{api} runs a kernel without a framework and takes NumPy arrays; "
                               f"got a torch tensor of shape {tuple(t.shape)} (call the kernel "
                               "directly with torch tensors)")
    return found


class _ToDevice:
    """Copies each argument array to one `neuron` tensor (an array passed twice, once)."""

    def __init__(self):
        self.copies: dict[int, tuple[np.ndarray, torch.Tensor]] = {}

    def __call__(self, value):
        if isinstance(value, np.ndarray):
            if id(value) not in self.copies:
                if any(s < 0 for s in value.strides):
                    raise NkiTypeError("nki.execute: numpy arrays with negative strides cannot be "
                                       "kernel arguments")
                self.copies[id(value)] = (value, torch.from_numpy(value).to("neuron"))
            return self.copies[id(value)][1]
        if isinstance(value, (list, tuple)):
            return type(value)(self(v) for v in value)
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if is_object(value):
            return with_attributes(value, {k: self(v) for k, v in attributes(value).items()})
        return value


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1).contiguous().view(torch.uint8)


def execute(kernel, *args, **kwargs):
    """nki.execute(kernel, *args, **kwargs): the kernel's return value, its tensors as NumPy
    arrays."""
    k = as_kernel(kernel)
    arrays = require_numpy("nki.execute", args, kwargs)
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if a is not b and np.shares_memory(a, b):
                raise NkiTypeError("nki.execute: two argument arrays share memory; each becomes "
                                   "its own device tensor, so pass distinct arrays")
    to_device = _ToDevice()
    device_args, device_kwargs = to_device(args), to_device(kwargs)
    outputs = k.run(device_args, device_kwargs)
    for array, copy in to_device.copies.values():
        if not torch.equal(_bits(torch.from_numpy(array)), _bits(copy.cpu())):
            raise NkiValidationError(
                "execute-arguments", f"nki.execute: kernel {k.fn.__qualname__} wrote into its "
                f"argument array of shape {array.shape}; nki.execute's result is the kernel's "
                "return value, and whether writes reach the caller's arrays is not documented: "
                "return the tensor instead")
    return numpy_results(outputs)
