"""Fused kernels work on several SIMD vectors per loop step, so that their math overlaps.

Inductor's C++ code generation steps a pointwise loop by one SIMD vector (8 floats on AVX2) and
applies every op of the chain to it before the next step. A chain of transcendental functions
(sin, exp, tanh, log: each a polynomial of a few dozen dependent instructions, called out of
line) is then one long dependency chain per step, longer than the CPU's reorder window, and the
core waits on each instruction's latency: the benchmark's 20-op chain ran at 16 ms per 1M floats
as one such kernel, slower than the 13 ms eager takes for the same functions one op at a time
(each eager op's loop overlaps its independent steps). Stepping by four vectors (Inductor's
VectorizedN, as it does for bfloat16) puts four independent chains side by side: 8 ms, the same
numbers element for element (each vector is computed as before).

The wider step applies to the chains fused mode compiles, on the thread that compiles them
(`fused_tiling()` around the compile); a user's torch.compile on any thread keeps Inductor's
tiling. A loop shorter than the wider step keeps Inductor's own step.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from .thread_scoped_patch import ThreadScopedPatch

# Vectors side by side in one loop step: 4 hides the latency of the Sleef functions on the CPUs
# measured (AVX2: 16.0 ms with 1, 10.6 ms with 2, 8.0 ms with 4, 7.9 ms with 8 per 1M floats).
VECTORS_PER_STEP = 4


def _tiling_select() -> Any:
    # internal: see runtime/torch_internals.py "torch._inductor.codegen.cpp.TilingSelect"
    from torch._inductor.codegen import cpp

    return cpp.TilingSelect


def _widened_tiling(original: Any, self: Any, fn_list: Any, var_sizes_list: Any) -> Any:
    # internal: see runtime/torch_internals.py "torch._inductor.cpu_vec_isa.pick_vec_isa"
    from torch._inductor import cpu_vec_isa

    factors, indices, stats = original(self, fn_list, var_sizes_list)
    if not factors:
        return factors, indices, stats
    group, reduction_group = max(var_sizes_list, key=lambda sizes: len(sizes[1]))
    ranges = list(group) + list(reduction_group)
    float_elements = cpu_vec_isa.pick_vec_isa().nelements(dtype=torch.float32)
    return widened(list(factors), list(indices), ranges, float_elements), indices, stats


_PATCH = ThreadScopedPatch(_tiling_select, "select_tiling", _widened_tiling)


@contextlib.contextmanager
def fused_tiling() -> Iterator[None]:
    """Inductor's C++ kernels generated in this block on this thread step by several vectors,
    and are cached under fused_cache_tag()."""
    # internal: see runtime/torch_internals.py "torch.compiler.config.cache_key_tag"
    with _PATCH.active(), torch.compiler.config.patch(cache_key_tag=fused_cache_tag()):
        yield


def fused_cache_tag() -> str:
    """torch.compiler.config.cache_key_tag for a fused chain's compile: Inductor's FX graph cache
    keys on it, so a chain's wider-stepped kernel and a user's torch.compile of the same graph
    (Inductor's own step) are cached apart. The user's own tag is kept in it."""
    user = torch.compiler.config.cache_key_tag
    return f"{user}+torchneuron-fused-{VECTORS_PER_STEP}-vectors"


def widened(factors: list, indices: list, ranges: list, float_elements: int) -> list:
    """The tiling factors for a loop whose Inductor tiling is `factors` over loop `indices` of
    `ranges`: a one-level tiling by one float vector or less (or a low-precision vector of two)
    steps by VECTORS_PER_STEP float vectors where the tiled loop is a known size that long."""
    wide = VECTORS_PER_STEP * float_elements
    if len(factors) != 1 or factors[0] >= wide:
        return factors
    size = ranges[indices[0]] if -len(ranges) <= indices[0] < len(ranges) else None
    if not isinstance(size, int) and not (hasattr(size, "is_Integer") and size.is_Integer):
        return factors
    return [wide] if int(size) >= wide else factors

