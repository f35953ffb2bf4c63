"""The targeted tensor views of the newest NKI reference: NkiTensor.flatten_dims (merge a
contiguous run of dimensions), reshape_dim (split one), rearrange (einops-style split, reorder,
merge), vector_select (per-partition rows of an HBM tensor) and select with a runtime index
(both indirect views). Each changes only shape and strides, as on the chip; no data moves."""

from __future__ import annotations

import math

from . import tensor
from .errors import NkiValidationError, describe
from .indirect import IndirectView


def _dim(t, dim: int, what: str) -> int:
    d = dim + t.ndim if dim < 0 else dim
    if not 0 <= d < t.ndim:
        raise NkiValidationError("view", f"{describe(t)}: {what} {dim} is not a dimension of its "
                                 f"{t.ndim}")
    return d


def flatten_dims(t, start_dim: int, end_dim: int):
    start, end = _dim(t, start_dim, "start_dim"), _dim(t, end_dim, "end_dim")
    if start > end:
        raise NkiValidationError("view", f"{describe(t)}: start_dim {start_dim} is after end_dim "
                                 f"{end_dim}")
    if start == 0 and t.on_chip and end > 0:
        raise NkiValidationError("partition-dim", f"{describe(t)}: flatten_dims({start_dim}, "
                                 f"{end_dim}) merges the partition dimension; on-chip tensors "
                                 "keep dim 0")
    inner = [d for d in range(start, end + 1) if t.shape[d] != 1]  # size-1 dims merge freely
    for outer, nxt in zip(inner, inner[1:]):
        if t.strides[outer] != t.strides[nxt] * t.shape[nxt]:
            raise NkiValidationError("reshape", f"{describe(t)} with strides {t.strides}: "
                                     f"dimensions {start}..{end} are not contiguous in memory, "
                                     "so they cannot merge into one view")
    stride = t.strides[inner[-1]] if inner else t.strides[end]
    shape = t.shape[:start] + (math.prod(t.shape[start:end + 1]),) + t.shape[end + 1:]
    strides = t.strides[:start] + (stride,) + t.strides[end + 1:]
    return t.strided_view(shape, strides, t.offset)


def reshape_dim(t, dim: int, shape):
    d = _dim(t, dim, "dim")
    sizes = [int(s) for s in shape]
    if sizes.count(-1) > 1:
        raise NkiValidationError("reshape", f"{describe(t)}: reshape_dim shape {tuple(shape)} "
                                 "may hold one -1")
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        sizes[sizes.index(-1)] = t.shape[d] // known if known and t.shape[d] % known == 0 else 0
    if math.prod(sizes) != t.shape[d] or any(s <= 0 for s in sizes):
        raise NkiValidationError("reshape", f"{describe(t)}: reshape_dim({dim}, {tuple(shape)}) "
                                 f"must split dimension {d} of size {t.shape[d]} exactly")
    if d == 0 and t.on_chip and len(sizes) != 1:
        raise NkiValidationError("partition-dim", f"{describe(t)}: reshape_dim(0, ...) splits "
                                 "the partition dimension; on-chip tensors keep dim 0")
    strides, step = [], t.strides[d]
    for s in reversed(sizes):
        strides.append(step)
        step *= s
    strides.reverse()
    return t.strided_view(t.shape[:d] + tuple(sizes) + t.shape[d + 1:],
                   t.strides[:d] + tuple(strides) + t.strides[d + 1:], t.offset)


def rearrange(t, src_pattern, dst_pattern, fixed_sizes=None):
    """('b', ('h', 'w')) -> ('b', 'w', 'h'): split the grouped source dims (sizes from
    fixed_sizes, one inferred), reorder by name, merge the grouped destination dims."""
    fixed = dict(fixed_sizes or {})
    src = [(p,) if isinstance(p, str) else tuple(p) for p in src_pattern]
    if len(src) != t.ndim:
        raise NkiValidationError("view", f"{describe(t)}: rearrange source pattern "
                                 f"{tuple(src_pattern)} names {len(src)} dimensions of its "
                                 f"{t.ndim}")
    view, names = t, []
    for d in reversed(range(len(src))):  # split from the last, so earlier dims keep their index
        group = src[d]
        if len(group) > 1:
            sizes = [fixed.get(n, -1) for n in group]
            view = reshape_dim(view, d, sizes)
    for group in src:
        names.extend(group)
    if len(set(names)) != len(names):
        raise NkiValidationError("view", f"rearrange: {tuple(src_pattern)} repeats a name")
    dst = [(p,) if isinstance(p, str) else tuple(p) for p in dst_pattern]
    order = [n for group in dst for n in group]
    if sorted(order) != sorted(names):
        raise NkiValidationError("view", f"rearrange: {tuple(dst_pattern)} must name exactly the "
                                 f"dimensions of {tuple(src_pattern)}")
    view = view.permute([names.index(n) for n in order])
    d = 0
    for group in dst:  # merge groups, tracking the position of each in the permuted view
        if len(group) > 1:
            view = flatten_dims(view, d, d + len(group) - 1)
        d += 1
    return view


def vector_select(t, dim: int, vector_offset):
    """Row vector_offset[p] of dimension 0 of an HBM tensor for each partition p: an indirect
    view of shape (vector_offset.shape[0],) + t.shape[1:]."""
    if dim != 0:
        raise NkiValidationError("indirect-offset", f"{describe(t)}: vector_select dim {dim} "
                                 "must be 0")
    if t.on_chip:
        raise NkiValidationError("indirect-offset", f"{describe(t)}: vector_select reads HBM "
                                 "tensors only")
    if t.is_indirect():
        raise NkiValidationError("indirect-offset", f"{describe(t)}: already an indirect view; "
                                 "only one dynamic select per tensor")
    rows = vector_offset.shape[0] if hasattr(vector_offset, "shape") else 0
    return IndirectView(t, (rows,) + t.shape[1:], t.strides, t.offset, t.dtype, 0,
                        vector=vector_offset)


def dynamic_select(t, dim: int, index):
    """t.select(dim, index) with index a one-element tensor or a register: dimension `dim` is
    removed and the element at `index` (read when an instruction runs) taken, an indirect view
    (rule indirect-offset for an index outside the dimension)."""
    d = _dim(t, dim, "dim")
    if d == 0 and t.on_chip:
        raise NkiValidationError("partition-dim", f"{describe(t)}: a dynamic select of the "
                                 "partition dimension; on-chip tensors keep dim 0")
    if t.is_indirect():
        raise NkiValidationError("indirect-offset", f"{describe(t)}: already an indirect view; "
                                 "only one dynamic select per tensor")
    shape = t.shape[:d] + t.shape[d + 1:]
    strides = t.strides[:d] + t.strides[d + 1:]
    return IndirectView(t, shape, strides, t.offset, t.dtype, d, scalar=index)


tensor.provide(flatten_dims=flatten_dims, reshape_dim=reshape_dim, rearrange=rearrange,
               vector_select=vector_select, dynamic_select=dynamic_select)
