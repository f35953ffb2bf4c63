"""vLLM's RMS norms on neuron run vLLM CPU's compiled kernels in eager mode.

vLLM routes `RMSNorm` through its IR ops (`vllm.ir.ops.rms_norm`, `fused_add_rms_norm`), whose
implementation each platform ranks (`get_default_ir_op_priority`). CUDA ranks its compiled
kernels (`vllm_c`) first when nothing is compiled and the PyTorch-native form when Inductor
generates code; vLLM's CPU platform always takes the native form, a chain of seven to nine ops
(pow, mean, add, rsqrt, mul, ...) for every norm of every layer and step. Neuron follows CUDA's
rule with the CPU's kernels: the provider `vllm_cpu_c` below runs `vllm._C.rms_norm` and
`fused_add_rms_norm` on the neuron tensors through torchneuron's boxed fallback, one op per norm
(about a tenth of the chain's time per norm here). The kernels sum in another order than
`mean`, so results differ from the chain's by float32 rounding.

The kernels read rows at the stride of a contiguous tensor and compute nonsense for any other
layout (a norm of a q/k view), so this provider takes contiguous neuron tensors only and leaves
everything else to the native form, which the priority lists after it. So does a decode graph's
capture (decode_graphs.py), which cannot hold the `_C` kernels.
"""

from __future__ import annotations

import torch
from vllm import ir

from .decode_graphs import capturing
from .vllm_kernels import fused_add_rms_norm as _fused_add_rms_norm_kernel
from .vllm_kernels import rms_norm as _rms_norm_kernel

PROVIDER = "vllm_cpu_c"
# The IR ops this module implements (vLLM's IrOpPriorityConfig field names).
OPS = ("rms_norm", "fused_add_rms_norm")


def _takes(x: torch.Tensor, weight: torch.Tensor | None, variance_size: int | None) -> bool:
    return (variance_size is None and weight is not None and x.device.type == "neuron"
            and weight.dtype == x.dtype and x.is_contiguous() and not capturing())


def _rms_norm_args(x, weight, epsilon, variance_size=None) -> bool:
    return _takes(x, weight, variance_size)


def _fused_add_rms_norm_args(x, x_residual, weight, epsilon, variance_size=None) -> bool:
    return _takes(x, weight, variance_size) and x_residual.is_contiguous() \
        and x_residual.dtype == x.dtype


@ir.ops.rms_norm.register_impl(PROVIDER, supports_args=_rms_norm_args)
def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, epsilon: float,
             variance_size: int | None = None) -> torch.Tensor:
    out = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    _rms_norm_kernel(out, x, weight, epsilon)
    return out


@ir.ops.fused_add_rms_norm.register_impl(PROVIDER, supports_args=_fused_add_rms_norm_args,
                                         inplace=True)
def fused_add_rms_norm(x: torch.Tensor, x_residual: torch.Tensor, weight: torch.Tensor | None,
                       epsilon: float, variance_size: int | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    # In place, as vLLM's CUDA kernel: x becomes the norm of x + residual, residual the sum.
    _fused_add_rms_norm_kernel(x, x_residual, weight, epsilon)
    return x, x_residual
