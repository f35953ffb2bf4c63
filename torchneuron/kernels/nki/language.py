"""nki.language: dtypes, memories, tensor creation, loops, SPMD ids, tile sizes, and the
high-level operations (nl.load, nl.add, nl.exp, nl.matmul, nl.sum, ...) that return new tiles.

Each high-level operation checks the same rules as the ISA instruction it stands for and returns
a fresh SBUF tile (PSUM for nl.matmul and nl.transpose). Arithmetic follows NKI's documented type
promotion; scalars are weakly typed (int -> int32, float -> float32).
"""

from __future__ import annotations

import math

import torch

from . import dtypes as _dt
from . import isa as _isa
from . import ops as _ops
from .buffers import as_buffer, hbm, private_hbm, psum, sbuf, shared_hbm  # noqa: F401
from .context import active as _active
from .context import current as _current
from .errors import NkiUnsupportedError, NkiValidationError, describe
from .registers import dynamic_range, fori_loop, while_loop  # noqa: F401
from .rules import elements_per_partition as _epp
from .rules import on_chip_operand as _on_chip
from . import tensor as _tensor_methods
from . import views as _views  # noqa: F401  (provides NkiTensor's reshaping views)
from . import tensor_indirection as _ti  # noqa: F401  (provides NkiTensor.indirect)
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


# ---- creation -------------------------------------------------------------------------------------

def _shape(shape) -> tuple:
    return (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)


def ndarray(shape, dtype, buffer=None, name="", address=None):
    """A new tensor; `address=(partition_offset, free_offset_in_bytes)` places an on-chip tensor
    explicitly (tensors placed at one address share memory, as on the chip)."""
    run = _current()
    dtype, buffer = _dt.as_nki_dtype(dtype), as_buffer(buffer)
    return NkiTensor.whole(run.allocate(_shape(shape), dtype, buffer, name, address))


def shared_constant(constant, dtype=None):
    """A shared-HBM tensor holding `constant` (a numpy array, a tensor or the path of a .npy
    file), as the compiler embeds it in the binary."""
    if isinstance(constant, (str, bytes)) or hasattr(constant, "__fspath__"):
        import numpy as np
        constant = np.load(constant)
    values = torch.as_tensor(constant)
    if dtype is None:
        dtype = values.dtype
    dtype = _dt.as_nki_dtype(dtype)
    t = ndarray(tuple(values.shape) or (1,), dtype, shared_hbm, "shared_constant")
    run = _current()
    if run.computes:
        t.write(values.reshape(-1) if values.is_floating_point() or dtype.is_float
                else values.to(torch.int64).reshape(-1), run)
    return t


def _filled(shape, value, dtype, buffer, name):
    t = ndarray(shape, dtype, buffer, name)
    run = _current()
    run.instructions[0] += 1  # a memset
    if run.computes:
        exact = isinstance(value, int) and t.dtype.is_integer
        t.write(torch.full((t.size,), value) if exact else
                torch.full((t.size,), _dt.float32_constant(value)), run)
    return t


def zeros(shape, dtype, buffer=None, name=""):
    return _filled(shape, 0, dtype, buffer, name)


def ones(shape, dtype, buffer=None, name=""):
    return _filled(shape, 1, dtype, buffer, name)


def full(shape, fill_value, dtype, buffer=None, name=""):
    return _filled(shape, fill_value, dtype, buffer, name)


def zeros_like(a, dtype=None, buffer=None, name=""):
    return zeros(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def ones_like(a, dtype=None, buffer=None, name=""):
    return ones(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def empty_like(a, dtype=None, buffer=None, name=""):
    return ndarray(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def shared_identity_matrix(n, dtype=uint8):
    t = zeros((n, n), dtype, sbuf, "identity")
    run = _current()
    if run.computes:
        t.write(torch.eye(n), run)
    return t


def rand(shape, dtype=float32, buffer=None, name=""):
    t = ndarray(shape, dtype, buffer, name)
    run = _current()
    if run.computes:
        t.write(torch.rand(t.size, generator=run.generator), run)
    return t


def random_seed(seed):
    _current().generator.manual_seed(int(seed if not isinstance(seed, NkiTensor)
                                         else seed.read_f32().reshape(-1)[0]))


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


# ---- high-level operations ----------------------------------------------------------------------------

def _tile(name: str, x) -> NkiTensor:
    run = _current()
    _on_chip(name, "x", x, run.limits)
    return x


def _values(x) -> torch.Tensor:
    return x.read_f32() if isinstance(x, NkiTensor) else torch.tensor(float(x))


def _dtype_of(x):
    return x.dtype if isinstance(x, NkiTensor) else _dt.scalar_dtype(x)


def _at_least_2d(shape) -> tuple:
    return tuple(shape) if len(shape) >= 2 else tuple(shape) + (1,)


def _result(name: str, shape, dtype, values, buffer=sbuf):
    out = ndarray(_at_least_2d(shape), dtype, buffer, name)
    run = _current()
    run.instructions[0] += 1  # a high-level operation is one engine instruction
    if run.computes:
        out.write(values.reshape(out.shape), run)
    return out


def _no_mask(name, kwargs):
    if "mask" in kwargs:
        raise NkiUnsupportedError(f"nl.{name}(mask=...) belongs to the legacy neuronxcc.nki API; "
                                  "slice the tensors instead")
    if kwargs:
        raise TypeError(f"nl.{name}: unexpected arguments {sorted(kwargs)}")


def _binary_function(op: _ops.Op):
    def function(x, y, dtype=None, **kwargs):
        _no_mask(op.name, kwargs)
        name = f"nl.{op.name}"
        tiles = [t for t in (x, y) if isinstance(t, NkiTensor)]
        if not tiles:
            raise TypeError(f"{name}: at least one operand must be an NKI tile")
        for t in tiles:
            _tile(name, t)
        if dtype is None:
            dtype = _dt.bool_ if op.compare else _dt.promote(_dtype_of(x), _dtype_of(y))
        dtype = _dt.as_nki_dtype(dtype)
        try:
            shape = torch.broadcast_shapes(*(t.shape for t in tiles))
        except RuntimeError:
            raise NkiValidationError("broadcast", f"{name}: shapes "
                                     f"{[t.shape for t in tiles]} do not broadcast") from None
        run = _current()
        values = op.binary(_values(x), _values(y)) if run.computes else None
        return _result(name, shape, dtype, values)
    function.__name__ = op.name
    return function


def _unary_function(op: _ops.Op):
    def function(x, dtype=None, **kwargs):
        _no_mask(op.name, kwargs)
        name = f"nl.{op.name}"
        _tile(name, x)
        run = _current()
        values = None
        if run.computes:
            values = op.unary(x.raw().to(torch.int64)) if op.kind == "bitvec" else \
                op.unary(x.read_f32())
        return _result(name, x.shape, _dt.as_nki_dtype(dtype or x.dtype), values)
    function.__name__ = op.name
    return function


for _op in _ops.BINARY:
    _op.function = _binary_function(_op)
    globals()[_op.name] = _op
for _op in _ops.UNARY:
    _op.function = _unary_function(_op)
    globals()[_op.name] = _op
del _op
prelu = _ops.prelu  # an activation of nisa.activate2 only (its slope is relu_param)


def _axes(name: str, x: NkiTensor, axis) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(sorted(a + x.ndim if a < 0 else a for a in axes))
    if 0 in axes:
        raise NkiValidationError("partition-reduce", f"{name}: axis {axis} includes the "
                                 f"partition dimension of {describe(x)}; engines reduce free "
                                 "axes only")
    return axes


def _reduction(name: str, reduce, op=None):
    def function(x, axis, dtype=None, keepdims=False, **kwargs):
        _no_mask(name, kwargs)
        _tile(f"nl.{name}", x)
        axes = _axes(f"nl.{name}", x, axis)
        shape = [1 if d in axes else s for d, s in enumerate(x.shape)] if keepdims else \
            [s for d, s in enumerate(x.shape) if d not in axes]
        run = _current()
        values = reduce(x.read_f32(), axes, keepdims) if run.computes else None
        return _result(f"nl.{name}", shape, _dt.as_nki_dtype(dtype or x.dtype), values)
    function.__name__ = name
    if op is not None:
        _ops.REDUCTION_ALIASES[function] = op
    return function


max = _reduction("max", lambda v, a, k: v.amax(dim=a, keepdim=k), _ops.maximum)
min = _reduction("min", lambda v, a, k: v.amin(dim=a, keepdim=k), _ops.minimum)
sum = _reduction("sum", lambda v, a, k: v.sum(dim=a, keepdim=k), _ops.add)
prod = _reduction("prod", lambda v, a, k: v.flatten(a[0]).prod(-1).reshape(
    [1 if d in a else s for d, s in enumerate(v.shape)] if k else
    [s for d, s in enumerate(v.shape) if d not in a]), _ops.multiply)
mean = _reduction("mean", lambda v, a, k: v.mean(dim=a, keepdim=k))
var = _reduction("var", lambda v, a, k: v.var(dim=a, keepdim=k, unbiased=False))
all = _reduction("all", lambda v, a, k: (v != 0).float().amin(dim=a, keepdim=k))


def softmax(x, axis=-1, dtype=None, **kwargs):
    _no_mask("softmax", kwargs)
    _tile("nl.softmax", x)
    axes = _axes("nl.softmax", x, axis)
    run = _current()
    values = torch.softmax(x.read_f32(), dim=axes[0]) if run.computes else None
    return _result("nl.softmax", x.shape, _dt.as_nki_dtype(dtype or x.dtype), values)


def rms_norm(x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None, **kwargs):
    """x / sqrt(sum(x^2 over axis) / n + epsilon) * w, computed in float32."""
    _no_mask("rms_norm", kwargs)
    _tile("nl.rms_norm", x)
    _tile("nl.rms_norm", w)
    axes = _axes("nl.rms_norm", x, axis)
    run = _current()
    values = None
    if run.computes:
        v = x.read_f32()
        scale = torch.rsqrt(v.square().sum(dim=axes, keepdim=True) / float(n) + float(epsilon))
        values = v * scale * w.read_f32()
    return _result("nl.rms_norm", x.shape, _dt.as_nki_dtype(dtype or compute_dtype or x.dtype),
                   values)


def dropout(x, rate, dtype=None, **kwargs):
    """x with each element zeroed with probability `rate` (nisa.dropout's rule: no rescale)."""
    _no_mask("dropout", kwargs)
    _tile("nl.dropout", x)
    run = _current()
    values = None
    if run.computes:
        p = rate.read_f32() if isinstance(rate, NkiTensor) else float(rate)
        keep = torch.rand(x.shape, generator=run.generator) >= p
        values = torch.where(keep, x.read_f32(), 0.0)
    return _result("nl.dropout", x.shape, _dt.as_nki_dtype(dtype or x.dtype), values)


def where(condition, x, y, dtype=None):
    for t in (condition, x, y):
        if isinstance(t, NkiTensor):
            _tile("nl.where", t)
    tiles = [t for t in (condition, x, y) if isinstance(t, NkiTensor)]
    shape = torch.broadcast_shapes(*(t.shape for t in tiles))
    dtype = dtype or _dt.promote(_dtype_of(x), _dtype_of(y))
    run = _current()
    values = torch.where(_values(condition) != 0, _values(x), _values(y)) if run.computes else None
    return _result("nl.where", shape, _dt.as_nki_dtype(dtype), values)


def gather_flattened(data, indices, axis=0, dtype=None, **kwargs):
    """out[p, ...] = data[p].flatten()[indices[p, ...]]: per partition, a gather over data's
    flattened free elements with uint32 indices; the result has indices' shape. An index past
    the partition's elements is refused (rule gather-index; the chip returns garbage)."""
    name = "nl.gather_flattened"
    _no_mask("gather_flattened", kwargs)
    run = _current()
    _on_chip(name, "data", data, run.limits)
    _on_chip(name, "indices", indices, run.limits)
    if axis != 0:
        raise NkiValidationError("gather-index", f"{name}: axis={axis!r}; the documented gather "
                                 "runs over each partition's flattened free elements (axis=0)")
    for role, t in (("data", data), ("indices", indices)):
        if not 2 <= t.ndim <= 4:
            raise NkiValidationError("operand-shape", f"{name}: {role} {describe(t)} must be 2-, "
                                     "3- or 4-dimensional")
    if indices.dtype is not _dt.uint32:
        raise NkiValidationError("operand-dtype", f"{name}: indices {describe(indices)} must be "
                                 "uint32")
    if indices.shape[0] != data.shape[0]:
        raise NkiValidationError("partition-mismatch", f"{name}: indices {describe(indices)} and "
                                 f"data {describe(data)} must have the same partitions")
    dtype = _dt.as_nki_dtype(dtype or data.dtype)
    out = ndarray(indices.shape, dtype, sbuf, name)
    run.instructions[0] += 1
    if not run.computes:
        return out
    n = _epp(data)
    index = indices.raw().to(torch.int64).reshape(indices.shape[0], -1)
    bad = index >= n
    if bool(bad.any()):
        p, j = (int(v) for v in bad.nonzero()[0])
        raise NkiValidationError("gather-index", f"{name}: indices {describe(indices)} hold "
                                 f"{int(index[p, j])} at partition {p}, past data "
                                 f"{describe(data)}'s {n} elements per partition")
    if dtype is data.dtype:  # a gather moves bits unchanged
        out.write_raw(data.raw().reshape(data.shape[0], n).gather(1, index), run)
    else:
        out.write(data.read_f32().reshape(data.shape[0], n).gather(1, index), run)
    return out


# ---- data movement -------------------------------------------------------------------------------------

def load(src, dtype=None, **kwargs):
    """HBM -> a new SBUF tile (one DMA)."""
    _no_mask("load", kwargs)
    if not isinstance(src, NkiTensor) or src.buffer.kind != "hbm":
        raise NkiValidationError("memory-access", f"nl.load reads HBM; "
                                 f"{describe(src) if isinstance(src, NkiTensor) else src!r} is "
                                 "not an HBM tensor (use nl.copy or nisa.tensor_copy on chip)")
    dst = ndarray(src.shape, dtype or src.dtype, sbuf, src.name)
    _isa.dma_copy(dst=dst, src=src)
    return dst


def store(dst, value, **kwargs):
    """An SBUF tile -> HBM (one DMA); PSUM must be copied to SBUF first."""
    _no_mask("store", kwargs)
    if not isinstance(dst, NkiTensor) or dst.buffer.kind != "hbm":
        raise NkiValidationError("memory-access", f"nl.store writes HBM; "
                                 f"{describe(dst) if isinstance(dst, NkiTensor) else dst!r} is "
                                 "not an HBM tensor")
    _isa.dma_copy(dst=dst, src=value)
    return dst


def load_transpose2d(src, dtype=None):
    if not isinstance(src, NkiTensor) or src.buffer.kind != "hbm" or src.ndim != 2:
        raise NkiValidationError("memory-access", "nl.load_transpose2d reads a 2-D HBM tensor")
    dst = ndarray((src.shape[1], src.shape[0]), src.dtype, sbuf, src.name)
    _isa.dma_transpose(dst=dst, src=src)
    if dtype is not None and _dt.as_nki_dtype(dtype) is not src.dtype:
        return copy(dst, dtype=dtype)
    return dst


def _copy(x, dtype=None):
    """nl.copy(x): a new SBUF tile with x's values. nl.copy is also the Scalar Engine's identity
    activation (nisa.activation(op=nl.copy)), so the name is the operator, calling this."""
    _tile("nl.copy", x)
    dst = ndarray(x.shape, dtype or x.dtype, sbuf, x.name)
    _isa.tensor_copy(dst=dst, src=x)
    return dst


_ops.copy.function = _copy
copy = _ops.copy


def matmul(x, y, transpose_x=False):
    """x @ y on the Tensor Engine into a new float32 PSUM tile; with transpose_x=True x is
    already (K, M), the stationary layout."""
    if not transpose_x:
        raise NkiValidationError(
            "matmul-layout", "nl.matmul(x, y, transpose_x=False) transposes x through PSUM, which "
            "cannot feed the Tensor Engine as stationary on NeuronCore-v3 and newer; pass x as "
            "(K, M) with transpose_x=True (nl.transpose + nisa.tensor_copy to get it)")
    out = ndarray((_epp(x), _epp(y)), float32, psum, "matmul")
    _isa.nc_matmul(dst=out, stationary=x, moving=y)
    return out


def transpose(x, dtype=None):
    """Swaps the partition and free dimension of a 2-D tile on the Tensor Engine (SBUF in,
    PSUM out)."""
    _tile("nl.transpose", x)
    out = ndarray((_epp(x), x.shape[0]), dtype or x.dtype, psum, "transpose")
    _isa.nc_transpose(dst=out, data=x)
    return out


def broadcast_to(src, shape):
    """A new SBUF tile with `src` broadcast to `shape` (numpy rules; copying a single partition
    to all partitions is allowed here, as the compiler does it)."""
    _tile("nl.broadcast_to", src)
    shape = _shape(shape)
    try:
        torch.broadcast_shapes(src.shape, shape)
    except RuntimeError:
        raise NkiValidationError("broadcast", f"nl.broadcast_to: {describe(src)} does not "
                                 f"broadcast to {shape}") from None
    run = _current()
    values = src.read_f32().expand(shape) if run.computes else None
    if run.computes and src.dtype.is_integer:
        values = src.raw().to(torch.int64).expand(shape)
    return _result("nl.broadcast_to", shape, src.dtype, values)


def expand_dims(x, axis):
    """The view x.expand_dim(axis)."""
    return x.expand_dim(axis)


# NkiTensor's operators (x + y, x * y, ...) and its broadcast_to are these functions.
_tensor_methods.provide(**{name: globals()[name] for name in (
    "add", "subtract", "multiply", "divide", "negative", "power")}, broadcast_to=broadcast_to)
