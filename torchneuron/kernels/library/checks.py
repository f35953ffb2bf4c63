"""The argument checks every library op makes before it runs, so that a wrong shape, dtype or
device is a clear error naming the op and the argument (as PyTorch's own ops do), not a failure
deep inside a kernel."""

from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float32, torch.bfloat16)


def floating(op: str, **tensors: torch.Tensor) -> None:
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"torchneuron.kernels.{op}: {name} must be a tensor, got "
                            f"{type(t).__name__}")
        if t.dtype not in FLOAT_DTYPES:
            raise TypeError(f"torchneuron.kernels.{op}: {name} has dtype {t.dtype}; the kernel "
                            "library computes in float32 or bfloat16")


def on_neuron(op: str, **tensors: torch.Tensor) -> None:
    """All tensors on one neuron device (the NKI kernels run on the software NeuronCore)."""
    devices = {t.device for t in tensors.values()}
    if len(devices) == 1 and next(iter(devices)).type == "neuron":
        return  # the common case, in one pass: this check runs at every call of every op
    first = None
    for name, t in tensors.items():
        if t.device.type not in ("neuron", "meta"):
            raise RuntimeError(f"torchneuron.kernels.{op}: {name} is on {t.device}; the kernel "
                               "library runs on neuron tensors (move it with .to('neuron'))")
        if first is None:
            first = (name, t.device)
        elif t.device != first[1]:
            raise RuntimeError(f"torchneuron.kernels.{op}: expected all tensors on one device, "
                               f"but {first[0]} is on {first[1]} and {name} on {t.device}")


def shape(op: str, condition: bool, message) -> None:
    """`message`: the text, or a function giving it (built only on failure: formatting shapes
    on every call costs more than a small op's eager fast path)."""
    if not condition:
        raise ValueError(f"torchneuron.kernels.{op}: {message() if callable(message) else message}")
