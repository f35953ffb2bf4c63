"""nki.language's high-level operations, each returning a new tile: the operators as functions
(nl.add(x, y), nl.exp(x), ...), the reductions (nl.sum, nl.max, ...), softmax, rms_norm, dropout,
where, gather_flattened, and the data movement functions (load, store, copy, matmul, transpose,
broadcast_to). language.py exports them.

Each checks the same rules as the ISA instruction it stands for and returns a fresh SBUF tile
(PSUM for nl.matmul and nl.transpose). Arithmetic follows NKI's documented type promotion;
scalars are weakly typed (int -> int32, float -> float32). Loading this module also sets each
operator's function (ops.py) and hands NkiTensor its arithmetic operators (tensor.py).
"""

from __future__ import annotations

import torch

from . import dtypes as _dt
from . import isa as _isa
from . import ops as _ops
from . import tensor as _tensor_methods
from .buffers import psum, sbuf
from .context import current as _current
from .creation import as_shape, ndarray
from .dtypes import float32
from .errors import NkiUnsupportedError, NkiValidationError, describe
from .rules import elements_per_partition as _epp
from .rules import on_chip_operand as _on_chip
from .tensor import NkiTensor


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
for _op in _ops.UNARY:
    _op.function = _unary_function(_op)
del _op


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
    already (K, M), the stationary layout. With transpose_x=False (x is (M, K)) the transpose
    AWS documents as inserted runs first: x through the Tensor Engine into PSUM, copied to SBUF
    as the stationary operand."""
    if not transpose_x:
        _tile("nl.matmul", x)
        if _epp(x) != y.shape[0]:
            raise NkiValidationError(
                "matmul-contraction", f"nl.matmul: x {describe(x)}'s free dimension must match "
                f"y {describe(y)}'s partition dimension (x @ y contracts them)")
        in_psum = ndarray((_epp(x), x.shape[0]), x.dtype, psum, "matmul_transpose")
        _isa.nc_transpose(dst=in_psum, data=x)
        x = ndarray(in_psum.shape, x.dtype, sbuf, "matmul_stationary")
        _isa.tensor_copy(dst=x, src=in_psum)
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
    shape = as_shape(shape)
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
_tensor_methods.provide(**{name: _ops.BY_NAME[name] for name in (
    "add", "subtract", "multiply", "divide", "negative", "power")}, broadcast_to=broadcast_to)
