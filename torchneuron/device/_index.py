"""How a `device` argument names a neuron device: an int, "neuron:1", torch.device("neuron", 1),
or None for the current device. Every submodule resolves its `device=` argument here."""

# Not called `_utils` like torch.cuda's: torch.load looks for `torch.<device>._utils.
# _get_device_index` and would then map storages differently than it does today.

from __future__ import annotations

from typing import Any

import torch

from .._C import device as _device_c
from ..runtime import device_state

_device_t = Any  # torch.device | str | int | None, as torch.cuda accepts


def _device_index(device: _device_t, optional: bool = True) -> int:
    """The index named by `device` (int, "neuron:1", torch.device), or the current one; every
    entry point that takes a device validates it here, with the one error `neuron:99` gives."""
    device_state.configure()
    if device is None:
        return _device_c.get_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        if device.index is None:
            return _device_c.get_device()
        device = device.index
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"Expected an int, str or torch.device for a neuron device, got {device!r}")
    _device_c.check_device(device)
    return device
