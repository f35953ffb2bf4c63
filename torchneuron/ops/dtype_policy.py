"""The float64 policy (NEURON_FLOAT64). Trainium has no float64 arithmetic; AWS's TorchNeuron
runs such ops on the host and copies the result back (its CPU_FALLBACK). Here a neuron op that
computes in float64 (or complex128) by default computes as the CPU does and warns once per op
per process that it would run on the host on Trainium (`warn`); `error` raises
NotImplementedError naming the op and the dtype (strict porting); `allow` computes without the
warning. Ops that only move bits are always allowed (op_lists.FLOAT64_DATA_MOVEMENT_OPS). Under
`warn` and `allow` every such call is counted per op (host_fallback_counts), for the readiness
accounting."""

from __future__ import annotations

import contextlib

from .._C import ops as _ops_c
from ..runtime.config import FLOAT64_POLICIES
from .op_lists import FLOAT64_DATA_MOVEMENT_OPS

# csrc/ops/DtypePolicy.h's Float64Policy values.
_CODES = {"error": 0, "allow": 1, "warn": 2}
assert set(_CODES) == set(FLOAT64_POLICIES)

_current = "warn"


def apply(policy: str) -> None:
    """Sets the policy for the whole process: "warn", "error" or "allow"."""
    global _current
    if policy not in FLOAT64_POLICIES:
        raise ValueError(f"float64 policy {policy!r} is not valid; accepted: {', '.join(FLOAT64_POLICIES)}")
    _ops_c.set_float64_policy(_CODES[policy], list(FLOAT64_DATA_MOVEMENT_OPS))
    _current = policy


def get() -> str:
    return _current


def host_fallback_counts() -> dict[str, int]:
    """Calls per op that computed in float64 or complex128 on the host ("aten::mul.Tensor": 3),
    since the process started or the last reset; the ops Trainium would run on the CPU."""
    return dict(_ops_c.float64_host_fallback_counts())


def reset_host_fallback_counts() -> None:
    """Clears the counts, and lets each op warn once more under `warn` (tests, batteries)."""
    _ops_c.reset_float64_host_fallbacks()


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
