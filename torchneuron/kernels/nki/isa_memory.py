"""Data movement: dma_copy and dma_transpose (DMA engines: HBM and SBUF, never PSUM),
tensor_copy and its dynamically addressed forms (compute engines, on chip) and memset.

A copy between equal dtypes moves bits; between different dtypes it casts through float32, as
the documentation of each instruction says.
"""

from __future__ import annotations

import torch

from . import dtypes as dt
from .context import current
from .errors import describe
from .indirect import IndirectView
from .isa_common import as_engine, require_engine_reach
from .isa_enums import dge_mode as DgeMode
from .isa_enums import engine as Engine
from .isa_enums import oob_mode as OobMode
from .rules import (fail, on_chip_operand, require_buffers, require_partitions,
                    require_same_free_size, require_same_partitions, require_tensor)
from .tensor_indirection import refuse_on_dma


def _move(dst, src, run) -> None:
    if dst.dtype is src.dtype:
        dst.write_raw(src.raw().reshape(-1), run)
    else:
        dst.write(src.read_f32().reshape(-1), run)


def dma_copy(dst, src, priority=None, oob_mode=OobMode.error, dge_mode=DgeMode.unknown,
             engine=Engine.unknown, name=None):
    I = "nisa.dma_copy"
    run = current()
    refuse_on_dma(I, {"dst": dst, "src": src})
    for role, t in (("dst", dst), ("src", src)):
        require_buffers(I, role, t, ("hbm", "sbuf"))
        if t.on_chip:
            require_partitions(I, role, t, run.limits)
    if dst.size != src.size:
        fail("dma-size", f"{I}: src {describe(src)} has {src.size} elements but dst "
             f"{describe(dst)} has {dst.size}; a DMA copies equal element counts")
    if priority is not None:
        if not run.limits.is_v4:
            fail("architecture", f"{I}: priority needs NeuronCore-v4")
        if dge_mode is DgeMode.none:
            fail("dma-mode", f"{I}: priority is not supported with dge_mode=none")
    if dge_mode is DgeMode.hwdge and run.limits.nc_version == "gen2":
        fail("architecture", f"{I}: hardware DGE needs NeuronCore-v3 or newer")
    eng = as_engine(I, engine)
    if eng not in (Engine.unknown, Engine.sync, Engine.scalar) or (
            eng is not Engine.unknown and dge_mode is not DgeMode.hwdge):
        fail("dma-mode", f"{I}: engine={eng} is valid only as engine.sync or engine.scalar "
             "with dge_mode=hwdge")
    if run.computes:
        if src.is_indirect() or dst.is_indirect():
            _indirect_move(I, dst, src, oob_mode is OobMode.skip, run)
        else:
            _move(dst, src, run)


def _indirect_move(I, dst, src, skip: bool, run) -> None:
    """A gather (indirect src) or scatter (indirect dst); with oob_mode=skip, rows whose index is
    out of bounds are left out: a gather leaves those dst elements as they were."""
    if src.is_indirect():
        address, valid = src.addresses(I, skip)
        bits = src.storage.typed(src.dtype)[address]
    else:
        bits, valid = src.raw(), None
    if dst.dtype is not src.dtype:
        bits = dt.from_float32(dt.to_float32(bits, src.dtype), dst.dtype)
    bits = bits.reshape(dst.shape)
    if dst.is_indirect():  # a row the gather skipped is not scattered either
        dst.scatter(bits, run, I, skip, also=None if valid is None else valid.reshape(dst.shape))
        return
    if valid is not None and not bool(valid.all()):
        bits = torch.where(valid.reshape(dst.shape), bits, dst.raw())
    dst.write_raw(bits.reshape(-1), run)


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=DgeMode.unknown,
                  oob_mode=OobMode.error, name=None):
    I = "nisa.dma_transpose"
    run = current()
    refuse_on_dma(I, {"dst": dst, "src": src})
    require_buffers(I, "dst", dst, ("sbuf",))
    require_buffers(I, "src", src, ("hbm", "sbuf"))
    require_partitions(I, "dst", dst, run.limits)
    default = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}
    if src.ndim not in default:
        fail("transpose-shape", f"{I}: src {describe(src)} must be 2-, 3- or 4-D")
    axes = tuple(axes) if axes is not None else default[src.ndim]
    if axes != default[src.ndim]:
        fail("transpose-shape", f"{I}: axes {axes} are not supported for a {src.ndim}-D src; "
             f"use {default[src.ndim]}")
    if dst.dtype is not src.dtype:
        fail("operand-dtype", f"{I}: dst {describe(dst)} must have src's dtype {src.dtype}")
    expected = tuple(src.shape[a] for a in axes)
    if tuple(dst.shape) != expected:
        fail("transpose-shape", f"{I}: dst {describe(dst)} must have shape {expected}")
    if dge_mode is DgeMode.hwdge and (src.shape[0] != 16 or src.shape[-1] % 128
                                      or src.dtype.itemsize != 2):
        fail("dma-mode", f"{I}: a hardware-DGE transpose needs src.shape[0] == 16, "
             f"src.shape[-1] % 128 == 0 and a 2-byte dtype; src is {describe(src)}")
    if run.computes:
        dst.write_raw(src.raw().permute(axes).contiguous(), run)


def tensor_copy(dst, src, engine=Engine.unknown, dtype=None, name=None):
    """dtype= (as AWS's tutorials call it) is the engine's output type: values are rounded to
    it, then stored as dst's dtype."""
    I = "nisa.tensor_copy"
    run = current()
    eng = as_engine(I, engine)
    for role, t in (("dst", dst), ("src", src)):
        on_chip_operand(I, role, t, run.limits)
    require_same_partitions(I, {"dst": dst, "src": src})
    require_same_free_size(I, {"dst": dst, "src": src})
    require_engine_reach(I, eng, {"dst": dst, "src": src})
    if eng is Engine.tensor:
        fail("operand-type", f"{I}: engine must be vector, scalar or gpsimd")
    cast = dt.as_nki_dtype(dtype) if dtype is not None else None
    if run.computes:
        if cast is None or cast is dst.dtype:
            _move(dst, src, run)
        else:
            dst.write(dt.to_float32(dt.from_float32(src.read_f32(), cast), cast).reshape(-1), run)


def _dynamic(instr: str, role: str, t) -> None:
    """The operand the instruction addresses at a runtime offset within each partition: a view
    made by .ap(scalar_offset=, indirect_dim=d) or .select(d, register), d a free dimension."""
    require_tensor(instr, role, t)
    if not isinstance(t, IndirectView) or t.scalar is None or t.indirect_dim == 0:
        fail("indirect-offset", f"{instr}: {role} {describe(t)} must be dynamically indexed "
             "within each partition (.ap(..., scalar_offset=reg, indirect_dim=d) or "
             ".select(d, reg), d a free dimension); use nisa.tensor_copy for a static copy")


def tensor_copy_dynamic_src(dst, src, engine=Engine.unknown, name=None):
    """nisa.tensor_copy from a src at a runtime offset within each partition (the offset is
    read when the instruction runs)."""
    _dynamic("nisa.tensor_copy_dynamic_src", "src", src)
    tensor_copy(dst, src, engine=engine)


def tensor_copy_dynamic_dst(dst, src, engine=Engine.unknown, name=None):
    """nisa.tensor_copy to a dst at a runtime offset within each partition."""
    _dynamic("nisa.tensor_copy_dynamic_dst", "dst", dst)
    tensor_copy(dst, src, engine=engine)


def memset(dst, value, engine=Engine.unknown, name=None):
    I = "nisa.memset"
    run = current()
    eng = as_engine(I, engine)
    on_chip_operand(I, "dst", dst, run.limits)
    require_engine_reach(I, eng, {"dst": dst})
    if eng not in (Engine.unknown, Engine.vector, Engine.gpsimd):
        fail("operand-type", f"{I}: engine must be vector or gpsimd")
    if not isinstance(value, (int, float, bool)):
        fail("operand-type", f"{I}: value={value!r} must be a compile-time constant")
    if run.computes:
        exact = isinstance(value, int) and dst.dtype.is_integer
        fill = torch.full((dst.size,), value) if exact else \
            torch.full((dst.size,), dt.float32_constant(value), dtype=torch.float32)
        dst.write(fill, run)
