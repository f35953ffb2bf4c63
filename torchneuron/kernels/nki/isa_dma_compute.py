"""nisa.dma_compute: the arithmetic inside the DMA engines, as nki.isa documents it:
dst = srcs[0] * scales[0] + srcs[1] * scales[1] + ... in float32, cast to dst's dtype. With an
indirect source or dst (`.ap(vector_offset=...)`) it is a read-modify-write: a scatter-add into
HBM rows (dst[idx] = dst[idx] + src) or a gather-add from them (dst = dst + src[idx])."""

from __future__ import annotations

from . import dtypes as dt
from .context import current
from .errors import describe
from .isa_enums import oob_mode as OobMode
from .ops import as_op
from .rules import fail, require_buffers, require_partitions
from .tensor_indirection import refuse_on_dma

MAX_SOURCES = 16  # documented: at most 16 tensors in srcs


def _values(I: str, t, skip: bool):
    """(float32 values of t, flat; which elements an indirect t reaches, or None)."""
    if t.is_indirect():
        address, valid = t.addresses(I, skip)
        bits = t.storage.typed(t.dtype)[address]
        return dt.to_float32(bits, t.dtype).reshape(-1), valid.reshape(-1)
    return t.read_f32().reshape(-1), None


def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=OobMode.error,
                name=None):
    I = "nisa.dma_compute"
    run = current()
    srcs = list(srcs) if isinstance(srcs, (list, tuple)) else [srcs]
    if not 1 <= len(srcs) <= MAX_SOURCES:
        fail("dma-size", f"{I}: {len(srcs)} source tensors; dma_compute takes 1 to {MAX_SOURCES}")
    op = as_op(reduce_op, I, "reduce_op")
    if op.name != "add":
        fail("operator", f"{I}: reduce_op={op!r}; the DMA engines support only nl.add")
    if scales is not None:
        scales = list(scales)
        if len(scales) != len(srcs) or any(float(s) != 1.0 for s in scales):
            fail("operand-type", f"{I}: scales={scales!r} must hold 1.0 for each of the "
                 f"{len(srcs)} sources (the only scale the DMA engines support)")
    operands = [("dst", dst)] + [(f"srcs[{i}]", s) for i, s in enumerate(srcs)]
    refuse_on_dma(I, dict(operands))
    for role, t in operands:
        require_buffers(I, role, t, ("hbm", "sbuf"))
        if t.on_chip:
            require_partitions(I, role, t, run.limits)
        if t.size != dst.size:
            fail("dma-size", f"{I}: {role} {describe(t)} has {t.size} elements but dst "
                 f"{describe(dst)} has {dst.size}; every tensor must match")
    if any(t.is_indirect() for _, t in operands):
        if len(srcs) != 2:
            fail("dma-mode", f"{I}: a read-modify-write through vector_offset takes exactly 2 "
                 f"sources, got {len(srcs)}")
        if not unique_indices:
            fail("dma-mode", f"{I}: unique_indices=False; a read-modify-write through "
                 "vector_offset needs unique indices (non-unique are not supported)")
    if not run.computes:
        return
    skip = oob_mode is OobMode.skip
    total, reached = None, None
    for s in srcs:
        values, valid = _values(I, s, skip)
        total = values if total is None else total + values
        if valid is not None:
            reached = valid if reached is None else reached & valid
    if dst.is_indirect():
        also = None if reached is None else reached.reshape(dst.shape)
        dst.scatter(dt.from_float32(total, dst.dtype).reshape(dst.shape), run, I, skip, also)
        return
    if reached is not None and not bool(reached.all()):  # skipped rows keep dst as it was
        total = total.where(reached, dst.read_f32().reshape(-1))
    dst.write(total, run)
