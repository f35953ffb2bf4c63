"""Which GEMM kernel a compiled neuron matmul runs, by its sizes, and `torchneuron::linear_by_size`,
the linear layer that makes that choice at the call.

onednn_gemm.py lowers a compiled graph's float32 matmuls to oneDNN's inner product where it beats
ATen's BLAS call (MKL) and keeps ATen's kernel elsewhere; `onednn_wins` is that rule. When the
graph's row count is known at compile time, the lowering decides. When it is dynamic (vLLM
compiles one graph for prefill and decode alike, hinted at 2,048 rows), the hint would send every
call to oneDNN, and a decode step's 1 to 8 rows would pay oneDNN's fixed cost: 3-4x MKL's time at
1x128x384 on the development host. So such a matmul lowers to `linear_by_size`, which asks
`onednn_wins` with the rows it gets. Inside a device graph's capture the op runs once, in Python,
and the graph records the kernel it chose for the captured size.

The op is defined when torchneuron is imported (torchneuron.compile), not with Inductor, so that
code Inductor or vLLM cached in another process finds it before this process generates code."""

from __future__ import annotations

import torch

# Measured crossovers (onednn_gemm.py's docstring); below them ATen's kernel is at least as fast.
MIN_MULTIPLY_ADDS = 1 << 22
MIN_WIDTH = 16  # K and N: oneDNN lost to MKL on N=1 and K=1 shapes of 4M multiply-adds


def onednn_wins(m: int, k: int, n: int) -> bool:
    """Whether oneDNN's inner product beats ATen's kernel on a float32 (m x k) @ (k x n)."""
    return min(k, n) >= MIN_WIDTH and m * n * k >= MIN_MULTIPLY_ADDS


def linear_by_size(input: torch.Tensor, weight: torch.Tensor,
                   bias: torch.Tensor | None) -> torch.Tensor:
    """`input @ weight.T + bias` (2-D input, weight n x k) on oneDNN or ATen, by the sizes."""
    m, k = input.shape
    n = weight.shape[0]
    if onednn_wins(m, k, n):
        # internal: see runtime/torch_internals.py "_linear_pointwise.default"
        return torch.ops.mkldnn._linear_pointwise(input, weight, bias, "none", [], "")
    if bias is None:
        return torch.mm(input, weight.t())
    return torch.addmm(bias, input, weight.t())


def _linear_by_size_meta(input: torch.Tensor, weight: torch.Tensor,
                         bias: torch.Tensor | None) -> torch.Tensor:
    return input.new_empty((input.shape[0], weight.shape[0]))


# A library fragment with a plain Python kernel: the least dispatch a Python-defined op can have
# (a compiled graph without device graphs pays it at each call).
_library = torch.library.Library("torchneuron", "FRAGMENT")
_library.define("linear_by_size(Tensor input, Tensor weight, Tensor? bias) -> Tensor")
_library.impl("linear_by_size", linear_by_size, "CompositeExplicitAutograd")
_library.impl("linear_by_size", _linear_by_size_meta, "Meta")
