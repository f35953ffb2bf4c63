"""The argument checks every library op makes before it runs, so that a wrong shape, dtype or
device is a clear error naming the op and the argument (as PyTorch's own ops do), not a failure
deep inside a kernel."""

from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float32, torch.bfloat16)

_neuron_devices: dict[torch.device, bool] = {}


def is_neuron(device: torch.device) -> bool:
    """device.type == "neuron", remembered per device: naming a PrivateUse1 device type costs
    microseconds inside a training step (measured: ~4 us a call beside the backward's device
    thread, against ~1 us for this lookup), and every op and swapped module asks it."""
    known = _neuron_devices.get(device)
    if known is None:
        known = _neuron_devices[device] = device.type == "neuron"
    return known


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


def inputs(op: str, ids: tuple[str, torch.Tensor] | None = None, **floats: torch.Tensor) -> None:
    """floating(**floats) and on_neuron(**floats, and the integer tensor `ids` (name, tensor)) in
    one lean pass when all is well, as it is at nearly every call of every op: at a tiny model's
    sizes an op takes tens of microseconds, and two passes over keyword dicts cost several.
    Otherwise the two checks run and say what is wrong."""
    device = None
    for t in floats.values():
        if not isinstance(t, torch.Tensor) or t.dtype not in FLOAT_DTYPES:
            break
        if device is None:
            device = t.device
        elif t.device != device:
            break
    else:
        if device is not None and is_neuron(device) and (
                ids is None or isinstance(ids[1], torch.Tensor) and ids[1].device == device):
            return
    floating(op, **floats)
    on_neuron(op, **floats, **(dict([ids]) if ids is not None else {}))


def shape(op: str, condition: bool, message) -> None:
    """`message`: the text, or a function giving it (built only on failure: formatting shapes
    on every call costs more than a small op's eager fast path)."""
    if not condition:
        raise ValueError(f"torchneuron.kernels.{op}: {message() if callable(message) else message}")
