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


def _format_neuron_tensors_from_a_host_copy() -> None:
    """`print(tensor)` works out its layout with arithmetic on the tensor itself, in float64
    except on devices PyTorch knows lack it (MPS, some XPUs). Formatting a neuron tensor from a
    host copy gives the same text (printing reads every element back to the host anyway) and
    never trips the float64 policy."""
    import torch._tensor_str as tensor_str

    format_data = tensor_str._tensor_str

    def _tensor_str(self, indent):
        return format_data(self.cpu() if self.device.type == "neuron" else self, indent)

    # internal: see runtime/torch_internals.py "torch._tensor_str._tensor_str"
    tensor_str._tensor_str = _tensor_str


_format_neuron_tensors_from_a_host_copy()
