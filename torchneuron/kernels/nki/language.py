"""nki.language, the namespace kernels import as `nl`: dtypes, memories, tile sizes, loops, SPMD
ids, device_print and the legacy index API's refusal, here; tensor creation from creation.py and
the high-level operations that return new tiles (nl.load, nl.add, nl.exp, nl.matmul, nl.sum, ...)
from high_level_ops.py; the control flow on device values (fori_loop, while_loop, if_else) from
control_flow.py.
"""

from __future__ import annotations

import math

import torch

from . import dtypes as _dt
from . import ops as _ops
from . import tensor_indirection as _ti  # noqa: F401  (provides NkiTensor.indirect)
from . import views as _views  # noqa: F401  (provides NkiTensor's reshaping views)
from .buffers import as_buffer, hbm, private_hbm, psum, sbuf, shared_hbm  # noqa: F401
from .context import active as _active
from .context import current as _current
from .creation import (empty_like, full, ndarray, ones, ones_like, rand,  # noqa: F401
                       random_seed, shared_constant, shared_identity_matrix, zeros, zeros_like)
from .errors import NkiUnsupportedError, NkiValidationError, describe
from .high_level_ops import (all, broadcast_to, copy, dropout, expand_dims,  # noqa: F401
                             gather_flattened, load, load_transpose2d, matmul, max, mean, min,
                             prod, rms_norm, softmax, store, sum, transpose, var, where)
from .control_flow import fori_loop, if_else, while_loop  # noqa: F401
from .registers import dynamic_range  # noqa: F401
from .tensor import DynSlice, NkiTensor

# ---- dtypes ------------------------------------------------------------------------------------
bool_, int8, int16, int32 = _dt.bool_, _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
float16, bfloat16, float32, tfloat32 = _dt.float16, _dt.bfloat16, _dt.float32, _dt.tfloat32
float8_e4m3, float8_e5m2, float8_e4m3fn = _dt.float8_e4m3, _dt.float8_e5m2, _dt.float8_e4m3fn
float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4, float8_e8m0fnu = _dt.UNSUPPORTED  # refused
# where used


from .objects import NKIObject  # noqa: E402,F401


# ---- tile sizes ----------------------------------------------------------------------------------

class _TileSize:
    """nl.tile_size: the selected NeuronCore's tile limits."""

    def limits(self):
        run = _active()
        if run is not None:
            return run.limits
        from .rules import resolve_target
        return resolve_target(None)

    pmax = property(lambda self: self.limits().pmax)
    psum_fmax = property(lambda self: self.limits().psum_bank_bytes // 4)
    gemm_stationary_fmax = property(lambda self: 128)
    gemm_moving_fmax = property(lambda self: 512)
    bn_stats_fmax = property(lambda self: 512)
    psum_min_align = property(lambda self: 4)
    sbuf_min_align = property(lambda self: 1)
    total_available_sbuf_size = property(lambda self: self.limits().sbuf_bytes_per_partition)


tile_size = _TileSize()


# ---- loops, SPMD, slices --------------------------------------------------------------------------

def affine_range(start, stop=None, step=1):
    """Iterations without loop-carried dependencies (reductions allowed); run in order here."""
    return range(start, stop, step) if stop is not None else range(start)


def sequential_range(start, stop=None, step=1):
    return range(start, stop, step) if stop is not None else range(start)


def static_range(start, stop=None, step=1):
    return range(start, stop, step) if stop is not None else range(start)


def ds(start, size):
    return DynSlice(start, size)


def program_id(axis=0):
    run = _current()
    if not run.grid:
        return 0
    if not 0 <= axis < len(run.grid):
        raise IndexError(f"nl.program_id({axis}): the launch grid {run.grid} has "
                         f"{len(run.grid)} axes")
    return run.program_ids[axis]


def num_programs(axes=None):
    run = _current()
    if axes is None:
        return math.prod(run.grid) if run.grid else 1
    if isinstance(axes, int):
        return run.grid[axes] if run.grid else 1
    return math.prod(run.grid[a] for a in axes) if run.grid else 1


def program_ndim():
    return len(_current().grid)


def device_print(print_prefix, tensor):
    """Prints `tensor`'s values, prefixed, to stdout when the instruction runs (nothing while
    torch.compile traces shapes)."""
    run = _current()
    if not isinstance(tensor, NkiTensor):
        raise TypeError(f"nl.device_print: {tensor!r} is not an NKI tensor")
    if tensor.buffer.kind == "psum":
        raise NkiValidationError("memory-access", f"nl.device_print: {describe(tensor)} is in "
                                 "PSUM; device_print reads SBUF or HBM")
    if not run.computes:
        return
    values = tensor.read_f32() if tensor.dtype.is_float else tensor.raw().to(torch.int64)
    program = f" program {run.program_ids}" if run.grid else ""
    print(f"{print_prefix}{program}: {describe(tensor)}\n{values.numpy()}", flush=True)


# ---- legacy index API (neuronxcc.nki) ---------------------------------------------------------------

class _Legacy:
    def __init__(self, name):
        self.name = name

    def _refuse(self, *args, **kwargs):
        raise NkiUnsupportedError(
            f"nl.{self.name} belongs to the legacy neuronxcc.nki index API (mgrid/arange index "
            "tiles and masks); NKI 0.7 (`import nki`) slices tensors with ranges, nl.ds and "
            ".ap(), which the software NeuronCore runs")

    __getitem__ = __call__ = _refuse


mgrid = _Legacy("mgrid")
arange = _Legacy("arange")


# The operators are nl names too: nl.add is both nisa's op=nl.add and the function nl.add(x, y)
# (high_level_ops.py set each one's function).
for _op in _ops.BINARY + _ops.UNARY:
    globals()[_op.name] = _op
del _op
prelu = _ops.prelu  # an activation of nisa.activate2 only (its slope is relu_param)
