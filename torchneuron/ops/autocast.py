"""torch.autocast("neuron"): CUDA's op lists with bfloat16, the device's native low-precision
type, as the default dtype. The cast policies and their op lists are registered in C++ for the
AutocastPrivateUse1 key (csrc/ops/Autocast.cpp, the one place they live); `op_lists()` reads
them."""

from __future__ import annotations

import torch

from .._C import ops as _ops_c
from . import dtype_policy

DEFAULT_DTYPE = torch.bfloat16
POLICIES = ("lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype", "promote",
            "banned")


def op_lists() -> dict[str, tuple[str, ...]]:
    """Policy name -> the ops ("name" or "name.overload") autocast casts with that policy."""
    return {policy: tuple(ops) for policy, ops in _ops_c.autocast_op_lists().items()}


def apply() -> None:
    """Make bfloat16 the autocast dtype for neuron. ATen keeps the default per thread and starts
    every thread at float16 for PrivateUse1: this sets it for the importing thread (where
    `import torch` ran); other threads pass `dtype=` or call `torch.set_autocast_dtype`."""
    torch.set_autocast_dtype("neuron", DEFAULT_DTYPE)
    _grad_scaler_inverts_its_scale_as_on_cpu()


def _grad_scaler_inverts_its_scale_as_on_cpu() -> None:
    """`GradScaler.unscale_` computes 1/scale in float64 on purpose (float32 division can be
    inexact under some compile options) and spares only MPS. On neuron that one scalar op runs
    as on the CPU: the float64 policy allows float64 while a neuron scaler unscales; the
    gradients themselves are unscaled in their own dtype."""
    from torch.amp import GradScaler

    unscale_ = GradScaler.unscale_

    def unscale_neuron_(self, optimizer):
        # internal: see runtime/torch_internals.py "GradScaler._device"
        if self._device != "neuron" or dtype_policy.get() == "allow":
            return unscale_(self, optimizer)
        with dtype_policy.float64_policy("allow"):
            return unscale_(self, optimizer)

    unscale_neuron_.__doc__ = unscale_.__doc__
    # internal: see runtime/torch_internals.py "GradScaler.unscale_"
    GradScaler.unscale_ = unscale_neuron_
