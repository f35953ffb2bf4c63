"""Matmuls in compiled neuron graphs run on oneDNN's GEMM instead of ATen's CPU `mm`/`addmm`.

Eager neuron runs the CPU's own ATen kernels, so an eager result is the CPU's bit for bit, which
is what porting and debugging against the CPU need. Compiled mode is for speed: there the
device's compiler picks its matmul kernel, as Inductor does for CPU linear layers under freezing
and as ATen does for bf16/fp16 matmuls: oneDNN's inner product (`mkldnn::_linear_pointwise`,
plain weights, no prepacking, so a parameter updated after compiling is read as it is).

Why: ATen's float32 `addmm` calls the BLAS the wheel ships (MKL), which on a non-Intel host takes
a generic code path; oneDNN picks its kernel from the CPU's features. On the development host
(AMD EPYC, AVX-512) oneDNN took 0.44-0.6x MKL's time from 4M multiply-adds up, with one thread
or two, and the same time around 1M; under 1M its fixed cost (~10 us) loses. A matrix-vector
product (N=1) or an outer product (K=1) is faster on MKL, hence the minimum width.

`NEURON_COMPILE_GEMM=aten` (runtime/config.py) keeps ATen's kernels, so compiled neuron graphs
are the compiled CPU's bit for bit again; so does turning oneDNN off in torch.backends.mkldnn."""

from __future__ import annotations

import sympy
import torch
import torch._inductor.lowering as lowering
from torch._inductor import ir
from torch._inductor.virtualized import V

from ..runtime import config
from .gemm_by_size import onednn_wins

aten = torch.ops.aten


def setting() -> str:
    """NEURON_COMPILE_GEMM ("onednn" or "aten"), or "aten" where PyTorch has no oneDNN or the
    user turned it off (`torch.backends.mkldnn.enabled = False`, which ATen obeys too)."""
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return "aten"
    return config.current().compile_gemm


def enabled() -> bool:
    return setting() == "onednn"


# internal: see runtime/torch_internals.py "V.graph.sizevars"
def _hint(expr) -> int:
    # A kernel choice, not a semantic one, so a hint without a guard is enough (dynamic shapes).
    return V.graph.sizevars.optimization_hint(expr, fallback=0)


def _static(expr) -> bool:
    return isinstance(expr, int) or sympy.sympify(expr).is_number


# internal: see runtime/torch_internals.py "ir.get_device_type"
def gemm_kernel(device_type: str, mat1, mat2) -> str:
    """The kernel `mat1 @ mat2` (Inductor IR nodes) in a graph being lowered runs: "onednn",
    "aten", or "by size" where the size hint says oneDNN but the row count is dynamic
    (linear_by_size decides at the call, gemm_by_size.py)."""
    if not enabled():
        return "aten"
    for mat in (mat1, mat2):
        if (ir.get_device_type(mat) != device_type or mat.get_dtype() != torch.float32 or
                len(mat.get_size()) != 2):
            return "aten"
    m, k = mat1.get_size()
    n = mat2.get_size()[1]
    if not onednn_wins(_hint(m), _hint(k), _hint(n)):
        return "aten"
    # The hint says oneDNN; a dynamic row count may be far smaller at the call (a decode step).
    return "by size" if not _static(m) and _static(k) and _static(n) else "onednn"


def _is_one(value) -> bool:
    return not isinstance(value, bool) and value == 1


def install(device_type: str) -> None:
    """Lower `aten.mm` and `aten.addmm` on `device_type` to oneDNN where it is the faster kernel,
    and to `linear_by_size` where that depends on a dynamic row count; everything else (other
    devices, dtypes, small or thin shapes) keeps Inductor's lowering."""
    # internal: see runtime/torch_internals.py "lowering.lowerings"
    # internal: see runtime/torch_internals.py "_linear_pointwise.default"
    original_mm = lowering.lowerings[aten.mm.default]
    original_addmm = lowering.lowerings[aten.addmm.default]
    linear = lowering.fallback_handler(torch.ops.mkldnn._linear_pointwise.default,
                                       add_to_fallback_set=False)
    linear_by_size = lowering.fallback_handler(torch.ops.torchneuron.linear_by_size.default,
                                               add_to_fallback_set=False)

    def lowered_linear(kernel, mat1, mat2, bias):
        # mat1 @ mat2 + bias == linear(mat1, weight=mat2.T, bias): the transpose is a view, and
        # oneDNN reads the weight with its strides as they are.
        weight = lowering.lowerings[aten.permute](mat2, [1, 0])
        if kernel == "by size":
            return linear_by_size(mat1, weight, bias)
        return linear(mat1, weight, bias, "none", [], "")

    def mm(mat1, mat2, out_dtype=None, *, layout=None):
        if out_dtype is None and layout is None:
            kernel = gemm_kernel(device_type, mat1, mat2)
            if kernel != "aten":
                return lowered_linear(kernel, mat1, mat2, None)
        return original_mm(mat1, mat2, out_dtype, layout=layout)

    def addmm(inp, mat1, mat2, *, alpha=1, beta=1, layout=None):
        # nn.Linear's bias: one value per output column (addmm's broadcast of a 1-D input).
        is_linear_bias = (len(inp.get_size()) == 1 and inp.get_dtype() == torch.float32 and
                          V.graph.sizevars.statically_known_equals(inp.get_size()[0],
                                                                   mat2.get_size()[1]))
        if layout is None and _is_one(alpha) and _is_one(beta) and is_linear_bias:
            kernel = gemm_kernel(device_type, mat1, mat2)
            if kernel != "aten":
                return lowered_linear(kernel, mat1, mat2, inp)
        return original_addmm(inp, mat1, mat2, alpha=alpha, beta=beta, layout=layout)

    # internal: see runtime/torch_internals.py "lowering.register_lowering"
    for packet, original, replacement in ((aten.mm, original_mm, mm),
                                          (aten.addmm, original_addmm, addmm)):
        # Named one by one: given the packet, register_lowering skips overloads it already has.
        overloads = [getattr(packet, name) for name in packet.overloads()]
        lowering.register_lowering([o for o in overloads if lowering.lowerings.get(o) is original],
                                   type_promotion_kind=None)(replacement)
