"""The Tensor Engine: nc_matmul (dst = stationary.T @ moving into PSUM, with PSUM accumulation)
and nc_transpose (on the Tensor or the Vector Engine).

Rules (nki.isa.nc_matmul's documentation): operands in SBUF, dst in PSUM; the contraction is the
partition dimension of both operands, at most 128; stationary free size <= 128, moving free size
<= 512 on NeuronCore-v3 (one PSUM bank of float32) and <= 4096 on v4; float8/bf16/fp16/tf32/fp32
inputs, fp32 paired only with fp32/tf32; dst float32 (v3) or float32/bfloat16 (v4).
"""

from __future__ import annotations

import contextlib

import torch

from . import dtypes as dt
from .context import current
from .errors import describe
from .isa_common import as_engine, matrix
from .isa_enums import engine as Engine
from .isa_enums import matmul_perf_mode as PerfMode
from .rules import (STATIONARY_FMAX, TRANSPOSE_VECTOR_MAX, elements_per_partition, fail,
                    on_chip_operand, require_buffers, require_partitions)
from .tensor_indirection import tensor_engine_operands

_MATMUL_INPUTS = (dt.float8_e4m3, dt.float8_e5m2, dt.bfloat16, dt.float16, dt.tfloat32, dt.float32)
_FP8 = (dt.float8_e4m3, dt.float8_e5m2, dt.float8_e4m3fn)


def _check_psum_bank(instr: str, dst, limits) -> None:
    """On NeuronCore-v3 a matmul accumulates into one 2 KiB PSUM bank per partition."""
    if limits.is_v4:
        return
    bank = limits.psum_bank_bytes
    start = dst.free_offset() * dst.dtype.itemsize
    end = start + elements_per_partition(dst) * dst.dtype.itemsize - 1
    if start // bank != end // bank:
        fail("psum-bank", f"{instr}: dst {describe(dst)} covers bytes {start}..{end} of each "
             f"PSUM partition, crossing a {bank}-byte bank boundary; a matmul output must lie "
             "in one PSUM bank")


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=PerfMode.none, name=None):
    I = "nisa.nc_matmul"
    run = current()
    L = run.limits
    require_buffers(I, "stationary", stationary, ("sbuf",))
    require_buffers(I, "moving", moving, ("sbuf",))
    require_buffers(I, "dst", dst, ("psum",))
    for role, t in (("stationary", stationary), ("moving", moving), ("dst", dst)):
        require_partitions(I, role, t, L)
    double = perf_mode is PerfMode.double_row
    K = stationary.shape[0]
    if moving.shape[0] != K:
        fail("matmul-contraction", f"{I}: stationary {describe(stationary)} and moving "
             f"{describe(moving)} must have the same partition (contraction) size")
    if double:
        if L.nc_version == "gen2":
            fail("architecture", f"{I}: perf_mode=double_row needs NeuronCore-v3 or newer")
        for role, t in (("stationary", stationary), ("moving", moving)):
            if t.ndim != 3 or t.shape[1] != 2:
                fail("matmul-layout", f"{I}: double_row {role} {describe(t)} must be "
                     "(K, 2, free): the contraction splits over partitions and a size-2 dim")
            if t.dtype not in _FP8:
                fail("matmul-dtype", f"{I}: double_row {role} {describe(t)} must be float8")
        if tile_size:
            fail("matmul-tiling", f"{I}: double_row cannot combine with tiling mode")
    M = elements_per_partition(stationary) // (2 if double else 1)
    N = elements_per_partition(moving) // (2 if double else 1)
    rows, cols = 128, STATIONARY_FMAX
    if bool(tile_position) != bool(tile_size):
        fail("matmul-tiling", f"{I}: tile_position and tile_size must be set together")
    if tile_size:
        rows, cols = (int(v) for v in tile_size)
        legal = (32, 64, 128) if L.nc_version != "gen2" else (64, 128)
        if rows not in legal or cols not in legal:
            fail("matmul-tiling", f"{I}: tile_size {tuple(tile_size)} must use sizes in {legal}")
        r0, c0 = (int(v) for v in tile_position)
        if r0 % rows or c0 % cols or r0 + rows > 128 or c0 + cols > 128:
            fail("matmul-tiling", f"{I}: tile_position {tuple(tile_position)} must be multiples "
                 f"of tile_size {tuple(tile_size)} inside the 128x128 array")
    if K > rows:
        fail("matmul-contraction", f"{I}: contraction (partition) size {K} of {describe(moving)}"
             f" exceeds {rows} rows of the Tensor Engine; split K and accumulate in PSUM")
    if M > cols:
        fail("matmul-stationary", f"{I}: stationary {describe(stationary)} has free size {M}; "
             f"the Tensor Engine takes at most {cols} (nl.tile_size.gemm_stationary_fmax)")
    fmax = L.moving_fmax if dst.dtype is dt.float32 else L.moving_fmax * 2
    if N > fmax:
        fail("matmul-moving", f"{I}: moving {describe(moving)} has free size {N}; at most "
             f"{fmax} on {L.profile} ({L.nc_version}) for a {dst.dtype} dst")
    if dst.shape[0] != M or elements_per_partition(dst) != N:
        fail("matmul-dst-shape", f"{I}: dst {describe(dst)} must be ({M}, {N}): stationary's "
             "free size by moving's free size")
    inputs = _MATMUL_INPUTS + ((dt.float8_e4m3fn,) if L.is_v4 else ())
    for role, t in (("stationary", stationary), ("moving", moving)):
        if t.dtype not in inputs:
            fail("matmul-dtype", f"{I}: {role} {describe(t)} has dtype {t.dtype}; the Tensor "
                 f"Engine takes {', '.join(d.name for d in inputs)} on {L.profile}")
    wide = {dt.float32, dt.tfloat32}
    if (stationary.dtype in wide) != (moving.dtype in wide):
        fail("matmul-dtype", f"{I}: stationary is {stationary.dtype} and moving is "
             f"{moving.dtype}; a float32/tfloat32 operand needs a float32/tfloat32 partner")
    if {stationary.dtype, moving.dtype} == {dt.float8_e4m3, dt.float8_e4m3fn}:
        fail("matmul-dtype", f"{I}: float8_e4m3 and float8_e4m3fn cannot be mixed")
    allowed_dst = (dt.float32, dt.bfloat16) if L.is_v4 else (dt.float32,)
    if dst.dtype not in allowed_dst:
        fail("matmul-dtype", f"{I}: dst {describe(dst)} must be "
             f"{' or '.join(d.name for d in allowed_dst)} on {L.profile}")
    _check_psum_bank(I, dst, L)
    if not run.computes:
        return
    with tensor_engine_operands():  # tensor-indirection views group 32 partitions here
        _multiply(dst, stationary, moving, accumulate, double, (K, M, N), run)


def _multiply(dst, stationary, moving, accumulate, double, sizes, run) -> None:
    K, M, N = sizes
    s = matrix(stationary).reshape(K * (2 if double else 1), M)
    m = matrix(moving).reshape(K * (2 if double else 1), N)
    if accumulate is None:  # accumulate where this PSUM was written since it was allocated
        accumulate = dst.written_state()
    if dst.dtype is dt.float32 and dst.ndim == 2 and accumulate is not None \
            and not dst.is_indirect():
        # The common case in place: PSUM float32 += or = stationary.T @ moving.
        target = dst.raw()
        dst.check_writable()
        if accumulate:
            target.addmm_(s.T, m)
        else:
            torch.mm(s.T, m, out=target) if target.is_contiguous() else target.copy_(s.T @ m)
        dst.mark_written(run)
        return
    result = s.T @ m
    previous = matrix(dst)
    if accumulate is None:
        result = torch.where(dst.was_written().reshape(M, N), previous + result, result)
    elif accumulate:
        result = previous + result
    dst.write(result.reshape(dst.shape), run)


def nc_transpose(dst, data, engine=Engine.unknown, name=None):
    I = "nisa.nc_transpose"
    run = current()
    eng = as_engine(I, engine)
    P, F = data.shape[0], elements_per_partition(data)
    on_chip_operand(I, "data", data, run.limits)
    on_chip_operand(I, "dst", dst, run.limits)
    if eng is Engine.unknown:
        small = P <= TRANSPOSE_VECTOR_MAX and F <= TRANSPOSE_VECTOR_MAX
        eng = Engine.tensor if (data.buffer.kind == "sbuf" and dst.buffer.kind == "psum"
                                ) or not small else Engine.vector
    if eng is Engine.tensor:
        require_buffers(I, "data", data, ("sbuf",))
        require_buffers(I, "dst", dst, ("psum",))
        if P > 128 or F > 128:
            fail("transpose-size", f"{I}: data {describe(data)} is {P}x{F}; the Tensor Engine "
                 "transposes at most 128x128")
    elif eng is Engine.vector:
        if P > TRANSPOSE_VECTOR_MAX or F > TRANSPOSE_VECTOR_MAX:
            fail("transpose-size", f"{I}: data {describe(data)} is {P}x{F}; the Vector Engine "
                 f"transposes at most {TRANSPOSE_VECTOR_MAX}x{TRANSPOSE_VECTOR_MAX}")
    else:
        fail("operand-type", f"{I}: engine must be nisa.engine.tensor or nisa.engine.vector")
    if dst.dtype is not data.dtype:
        fail("operand-dtype", f"{I}: dst {describe(dst)} must have data's dtype {data.dtype}")
    if dst.shape[0] != F or elements_per_partition(dst) != P:
        fail("transpose-shape", f"{I}: dst {describe(dst)} must be ({F}, {P}) for data "
             f"{describe(data)}")
    if run.computes:
        with tensor_engine_operands() if eng is Engine.tensor else contextlib.nullcontext():
            dst.write_raw(data.raw().reshape(P, F).T.contiguous(), run)
