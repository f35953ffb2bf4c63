"""Indirect access patterns: `t.ap(pattern, offset, scalar_offset=..., indirect_dim=d)` and
`t.ap(pattern, offset, vector_offset=idx, indirect_dim=d)`, the dynamic addressing of DMA gathers
and scatters (AWS's kernel library gathers token rows and scatters KV-cache rows this way).

The offsets are values the kernel computed, so they are read when the instruction runs:
- scalar_offset (an integer, a register or a one-element tensor) selects index s of dimension d
  of `t`: every element moves by s * t.strides[d];
- vector_offset (an on-chip integer tensor with one value per row of the pattern's first
  dimension) replaces that dimension: row i starts at offset + idx[i] * t.strides[d].
An index outside dimension d of `t` is refused (rule `indirect-offset`) unless the DMA asks
oob_mode=skip, which leaves those rows out of the copy, as the hardware's DGE does.

NKI 0.8's dynamic access patterns (`dynamic_ap`): a pattern entry [stride, count] whose stride or
count is an NkiScalar, read at run time. A scalar is a value (each operation makes a new one), so
the value read when the instruction runs is the one it holds when .ap() is called; the access
must stay inside the tensor's storage (rule `dynamic-pattern`, naming the values read).
"""

from __future__ import annotations

import torch

from . import dtypes as dt
from . import tensor
from .context import current
from .errors import NkiUnsupportedError, NkiValidationError, describe
from .scalars import NkiScalar
from .tensor import NkiTensor


def _device_scalar(role: str, value: NkiScalar) -> int:
    """An NkiScalar used for addressing: signed (documented for scalar_offset; the 0.8 pages
    found say nothing of unsigned strides or counts, so those are refused too) and not bound to
    one engine's sequencer (the pages do not say which sequencer issues the access)."""
    if value.dtype != dt.int32:
        raise NkiValidationError("indirect-offset", f"{role} {value!r}: addressing takes a "
                                 "signed nl.int32 scalar")
    if value.engine is not None:
        raise NkiValidationError("indirect-offset", f"{role} {value!r} is bound to one "
                                 "sequencer; load it without engine= to address with it")
    return value.value


def _scalar_value(value) -> int:
    if isinstance(value, NkiTensor):
        if value.size != 1:
            raise NkiValidationError("indirect-offset", f"scalar_offset {describe(value)} must "
                                     "hold one value")
        if value.dtype.is_float:
            raise NkiValidationError("indirect-offset", f"scalar_offset {describe(value)} must "
                                     "have an integer dtype")
        return int(value.raw().reshape(-1)[0].item())
    if isinstance(value, NkiScalar):
        return _device_scalar("scalar_offset", value)
    return int(value)  # a Python integer or a VirtualRegister


class IndirectView(NkiTensor):
    """An access pattern whose start, or whose first dimension's rows, are read at run time."""

    __slots__ = ("source", "indirect_dim", "scalar", "vector")

    def __init__(self, source: NkiTensor, shape, strides, offset, dtype, indirect_dim: int,
                 scalar=None, vector=None):
        super().__init__(source.storage, shape, strides, offset, dtype, source.name)
        self.source = source  # the tensor .ap() was called on: its dims bound the indices
        self.indirect_dim = int(indirect_dim)
        self.scalar = scalar
        self.vector = vector
        if not 0 <= self.indirect_dim < source.ndim:
            raise NkiValidationError("indirect-offset", f"{describe(source)}: indirect_dim "
                                     f"{indirect_dim} is not a dimension of its {source.ndim}")
        if vector is not None:
            if not isinstance(vector, NkiTensor) or not vector.on_chip \
                    or not vector.dtype.is_integer:
                raise NkiValidationError(
                    "indirect-offset", f"{describe(source)}: vector_offset must be an SBUF "
                    f"tensor of integers, got {describe(vector) if isinstance(vector, NkiTensor) else repr(vector)}")
            if vector.size != shape[0]:
                raise NkiValidationError(
                    "indirect-offset", f"{describe(source)}: vector_offset {describe(vector)} "
                    f"holds {vector.size} indices but the pattern's first dimension has "
                    f"{shape[0]} rows")

    def is_indirect(self) -> bool:
        return True

    def strided_view(self, *args, **kwargs):
        raise NkiValidationError("indirect-offset", f"{describe(self)}: an indirect access "
                                 "pattern cannot be sliced or viewed again; put the whole "
                                 "access in one .ap()")

    def addresses(self, instr: str, skip: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(flat storage index of each element (shape of the view), which are in bounds)."""
        d, size = self.indirect_dim, self.source.shape[self.indirect_dim]
        step = self.source.strides[d]
        grid = torch.full((), self.offset, dtype=torch.int64)
        for dim, (n, stride) in enumerate(zip(self.shape, self.strides)):
            if dim == 0 and self.vector is not None:
                continue
            shape = [1] * len(self.shape)
            shape[dim] = n
            grid = grid + (torch.arange(n) * stride).reshape(shape)
        if self.vector is not None:
            index = self.vector.raw().reshape(-1).to(torch.int64)
            rows = [1] * len(self.shape)
            rows[0] = self.shape[0]
            grid = grid + (index * step).reshape(rows)
            valid = ((index >= 0) & (index < size)).reshape(rows)
            bad = (~valid).reshape(-1).nonzero()
            what = f"vector_offset {describe(self.vector)}"
            first_bad = (int(bad[0]), int(index[bad[0]])) if len(bad) else None
        else:
            index = _scalar_value(self.scalar)
            grid = grid + index * step
            valid = torch.tensor(0 <= index < size)
            what = "scalar_offset"
            first_bad = None if 0 <= index < size else (0, index)
        if first_bad is not None and not skip:
            row, value = first_bad
            raise NkiValidationError(
                "indirect-offset", f"{instr}: {what} gives index {value} (row {row}) for "
                f"dimension {d} of {describe(self.source)}, whose size is {size}; indices must "
                "lie in 0..size-1 (or pass oob_mode=nisa.oob_mode.skip to leave such rows out)")
        valid = valid.expand(self.shape)
        grid = torch.where(valid, grid, 0)  # skipped rows read (and write) nothing
        numel = self._storage.typed(self.dtype).numel()
        if bool(valid.any()) and int(grid[valid].max()) >= numel:
            raise NkiValidationError("indirect-offset", f"{instr}: the indirect access of "
                                     f"{describe(self.source)} leaves its memory")
        return grid, valid

    def raw(self) -> torch.Tensor:
        address, _ = self.addresses("indirect read", skip=False)
        return self._storage.typed(self.dtype)[address]

    def scatter(self, values: torch.Tensor, run, instr: str = "indirect write",
                skip: bool = False, also: torch.Tensor | None = None) -> None:
        """Stores bits of this view's storage type at the view's addresses (the in-bounds ones,
        and only where `also` is true)."""
        address, valid = self.addresses(instr, skip)
        if also is not None:
            valid = valid & also
        self._storage.prepare_write(run)
        flat = self._storage.typed(self.dtype)
        flat[address[valid]] = values.reshape(self.shape)[valid]

    def write_raw(self, values: torch.Tensor, run) -> None:
        self.scatter(values, run)

    def write(self, values: torch.Tensor, run) -> None:
        self.scatter(dt.from_float32(values, self.dtype).reshape(self.shape), run)

    def mark_written(self, run) -> None:
        pass  # indirect views address HBM or SBUF, which keep no written marks


def dynamic_ap(t: NkiTensor, pattern, offset=None, dtype=None, **indirect) -> NkiTensor:
    """t.ap(pattern, ...) where a stride or count is an NkiScalar: the pattern with the scalars'
    values, checked against the storage here (rule dynamic-pattern), then built as a static
    one. On chip the first entry is the partition dimension, which stays static."""
    run = current()
    first = 1 if t.on_chip else 0
    resolved, read = [], []
    for dim, entry in enumerate(pattern):
        values = []
        for role, v in (("stride", entry[0]), ("count", entry[1])):
            if isinstance(v, NkiScalar):
                if dim < first:
                    raise NkiValidationError("dynamic-pattern", f"{describe(t)}: the partition "
                                             f"entry {list(entry)} of an on-chip pattern must "
                                             "be static")
                if role == "count" and not run.computes:
                    raise NkiUnsupportedError(
                        f"{describe(t)}: a count read at run time gives the access a shape "
                        "known only when the kernel runs, which torch.compile's shape trace "
                        "cannot follow")
                read.append(f"{role} of dim {dim} = {v.value}")
                values.append(_device_scalar(f"pattern {role}", v))
            else:
                values.append(int(v))
        resolved.append(values)
    elem_dtype = dt.as_nki_dtype(dtype) if dtype is not None else t.dtype
    start = t.offset if offset is None else t.storage.locate(int(offset))
    numel = t.storage.typed(elem_dtype).numel()
    low = start + sum(min(0, (n - 1) * s) for s, n in resolved)
    high = start + sum(max(0, (n - 1) * s) for s, n in resolved)
    what = f"{describe(t)}: the access pattern {resolved} at offset {start} ({', '.join(read)}, " \
           "read at run time)"
    if run.computes and any(n < 1 for _, n in resolved):
        raise NkiValidationError("dynamic-pattern", f"{what} has an empty dimension; counts "
                                 "must be at least 1")
    if run.computes and (low < 0 or high >= numel):
        raise NkiValidationError("dynamic-pattern", f"{what} reaches elements {low}..{high}, "
                                 f"outside the {numel} elements of its storage")
    return t.ap(resolved, offset, dtype, **indirect)


tensor.provide(IndirectView=IndirectView, dynamic_ap=dynamic_ap, NkiScalar=NkiScalar)
