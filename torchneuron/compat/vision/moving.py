"""Moving a case's inputs (tensors in nested lists, tuples and dicts, as torchvision's models,
ops and targets take them) to a device: the one walk the vision batteries share."""

from __future__ import annotations

import torch


def to_device(x, device):
    """`x` with every tensor in it moved to `device`; containers keep their types."""
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(v, device) for v in x)
    if isinstance(x, dict):
        return type(x)((k, to_device(v, device)) for k, v in x.items())
    return x
