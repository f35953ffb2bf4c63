"""The float64 policy (NEURON_FLOAT64). Trainium has no float64 arithmetic, so by default a
neuron op that would compute in float64 (or complex128) raises NotImplementedError naming the op and the
dtype; `allow` computes as the CPU does. Ops that only move bits are always allowed
(op_lists.FLOAT64_DATA_MOVEMENT_OPS)."""

from __future__ import annotations

import contextlib

from .. import _C
from ..runtime.config import FLOAT64_POLICIES
from .op_lists import FLOAT64_DATA_MOVEMENT_OPS

_current = "error"


def apply(policy: str) -> None:
    """Sets the policy for the whole process: "error" or "allow"."""
    global _current
    if policy not in FLOAT64_POLICIES:
        raise ValueError(f"float64 policy {policy!r} is not valid; accepted: {', '.join(FLOAT64_POLICIES)}")
    _C._set_float64_policy(FLOAT64_POLICIES.index(policy), list(FLOAT64_DATA_MOVEMENT_OPS))
    _current = policy


def get() -> str:
    return _current


@contextlib.contextmanager
def float64_policy(policy: str):
    """Temporarily switches the policy (tests, the compat battery)."""
    previous = _current
    apply(policy)
    try:
        yield
    finally:
        apply(previous)


def _format_neuron_tensors_in_float32() -> None:
    """`print(tensor)` computes its layout in float64, except on devices PyTorch knows lack it
    (MPS, some XPUs). Treat neuron the same, so printing never trips the float64 policy."""
    import torch
    import torch._tensor_str as tensor_str

    to_type = tensor_str.tensor_totype

    def tensor_totype(t: torch.Tensor) -> torch.Tensor:
        if t.device.type == "neuron":
            return t.to(dtype=torch.float)
        return to_type(t)

    tensor_str.tensor_totype = tensor_totype


_format_neuron_tensors_in_float32()
