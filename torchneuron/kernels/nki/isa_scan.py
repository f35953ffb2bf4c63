"""Scans along each partition, as nki.isa documents them: tensor_scalar_cumulative (a Vector
Engine running reduction through its accumulator registers), sequence_bounds (where each packed
segment starts and ends, GpSimd) and nonzero_with_count (stream compaction, GpSimd).

Each runs as whole-tile torch operations (cumulative ops, sorts), never a loop per element: the
simulator's cost is Python per instruction, so a loop over a 16K-element partition would cost
more than the rest of a kernel.
"""

from __future__ import annotations

import torch

from . import dtypes as dt
from .context import current
from .errors import describe
from .isa_common import (GPSIMD_CORE_PARTITIONS, int_matrix, matrix, require_arch,
                         scalar_or_vector, store)
from .isa_enums import reduce_cmd as ReduceCmd
from .ops import as_op
from .rules import (elements_per_partition, fail, on_chip_operand, require_buffers,
                    require_same_free_size, require_same_partitions)

# tensor_scalar_cumulative's documented input/output dtypes (no 32-bit integers: ISA limitation).
_CUMULATIVE_DTYPES = ("bfloat16", "float16", "float32", "float8_e4m3", "float8_e5m2", "uint8",
                      "uint16", "int8", "int16")
# What reset_reduce loads into the accumulator for each cumulative operator (documented).
_RESET = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": float("-inf"),
          "minimum": float("inf")}
_CUMULATIVE_CMDS = (ReduceCmd.reset_reduce, ReduceCmd.reduce, ReduceCmd.load_reduce)


def _running(op_name: str, x: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """reg_i = op1(x_i, reg_{i-1}) along dim 1, reg_{-1} = start (P,)."""
    if op_name == "add":
        return start[:, None] + torch.cumsum(x, dim=1)
    if op_name == "multiply":
        return start[:, None] * torch.cumprod(x, dim=1)
    if op_name == "maximum":
        return torch.cummax(torch.cat([start[:, None], x], dim=1), dim=1).values[:, 1:]
    if op_name == "minimum":
        return torch.cummin(torch.cat([start[:, None], x], dim=1), dim=1).values[:, 1:]
    # subtract, literally as documented: reg = x_i - reg. Not associative, so it runs column by
    # column; kernels use it rarely.
    out = torch.empty_like(x)
    reg = start
    for i in range(x.shape[1]):
        reg = x[:, i] - reg
        out[:, i] = reg
    return out


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None,
                             reduce_cmd=ReduceCmd.reset_reduce, name=None):
    """dst[p, i] = reg_p = op1(op0(src[p, i], imm0), reg_p) over the flattened free elements;
    reg starts from the accumulator register (reduce), op1's identity (reset_reduce) or imm1
    (load_reduce), and keeps its last value for the next Vector Engine accumulation."""
    I = "nisa.tensor_scalar_cumulative"
    run = current()
    op0, op1 = as_op(op0, I, "op0"), as_op(op1, I, "op1")
    if op0.kind != "arith" or op0.binary is None:
        fail("operator", f"{I}: op0={op0!r} must be an arithmetic operator (nl.add, "
             "nl.multiply, nl.maximum, ...)")
    if op1.name not in _RESET:
        fail("operator", f"{I}: op1={op1!r} must be nl.add, nl.subtract, nl.multiply, "
             "nl.maximum or nl.minimum")
    if reduce_cmd not in _CUMULATIVE_CMDS:
        fail("operator", f"{I}: reduce_cmd={reduce_cmd!r} must be reduce_cmd.reset_reduce, "
             "reduce or load_reduce")
    if (reduce_cmd is ReduceCmd.load_reduce) != (imm1 is not None):
        fail("operand-shape", f"{I}: imm1 is given exactly when reduce_cmd is load_reduce")
    operands = {"dst": dst, "src": src}
    for role, t in operands.items():
        on_chip_operand(I, role, t, run.limits)
        if t.dtype.name not in _CUMULATIVE_DTYPES:
            fail("operand-dtype", f"{I}: {role} {describe(t)} must be one of "
                 f"{', '.join(_CUMULATIVE_DTYPES)} (32-bit integers are an ISA limitation)")
    require_same_partitions(I, operands)
    require_same_free_size(I, operands)
    P = src.shape[0]
    v0 = scalar_or_vector(I, "imm0", imm0, P, run, require_f32=True)
    v1 = scalar_or_vector(I, "imm1", imm1, P, run, require_f32=True)
    if not run.computes:
        return
    y = op0.binary(matrix(src), v0)
    regs = run.vector_regs()
    if reduce_cmd is ReduceCmd.reset_reduce:
        start = torch.full((P,), _RESET[op1.name])
    elif reduce_cmd is ReduceCmd.load_reduce:
        start = v1.reshape(P) if isinstance(v1, torch.Tensor) else torch.full((P,), v1)
    else:
        start = regs[:P].clone()
    out = _running(op1.name, y, start)
    store(dst, out, run)
    if out.shape[1]:
        regs[:P] = out[:, -1]


def sequence_bounds(dst, segment_ids, name=None):
    """For each element of a (1, n) tile of segment ids, [start, end) of its segment (runs of
    equal ids), as a (1, 2, n) tile; id 0 is padding: start n, end -1."""
    I = "nisa.sequence_bounds"
    run = current()
    for role, t in (("dst", dst), ("segment_ids", segment_ids)):
        on_chip_operand(I, role, t, run.limits)
        require_buffers(I, role, t, ("sbuf",))  # GpSimd cannot reach PSUM
        if t.dtype not in (dt.float32, dt.int32):
            fail("operand-dtype", f"{I}: {role} {describe(t)} must be float32 or int32")
    if segment_ids.shape[0] != 1:
        fail("operand-shape", f"{I}: segment_ids {describe(segment_ids)} must have 1 partition "
             "(the instruction's partition dimension is always 1)")
    n = elements_per_partition(segment_ids)
    if dst.shape[0] != 1 or elements_per_partition(dst) != 2 * n:
        fail("operand-shape", f"{I}: dst {describe(dst)} must be (1, 2, {n}): a start and an "
             f"end for each of segment_ids' {n} elements")
    if not run.computes:
        return
    ids = matrix(segment_ids)[0]
    pos = torch.arange(n, dtype=torch.float32)
    pad = ids == 0
    new_run = torch.ones(n, dtype=torch.bool)
    new_run[1:] = ids[1:] != ids[:-1]
    run_end = torch.ones(n, dtype=torch.bool)
    run_end[:-1] = ids[:-1] != ids[1:]
    start = torch.cummax(torch.where(new_run, pos, torch.zeros(())), dim=0).values
    # The end of a run is the next index at or after i where the run ends, plus one.
    ends_rev = torch.where(run_end, pos + 1, torch.full((), float(n))).flip(0)
    end = torch.cummin(ends_rev, dim=0).values.flip(0)
    start = torch.where(pad, torch.full((), float(n)), start)
    end = torch.where(pad, torch.full((), -1.0), end)
    store(dst, torch.stack([start, end]).reshape(1, 2 * n), run)


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    """In partitions 0, 16, ..., 112 (each GpSimd core's first): the indices (+ index_offset) of
    src's nonzero elements in order, padding_val after them, and their count as the last of
    dst's n + 1 elements. Other partitions of dst are left as they are (documented)."""
    I = "nisa.nonzero_with_count"
    run = current()
    require_arch(I, "gen3")
    operands = {"dst": dst, "src": src}
    for role, t in operands.items():
        on_chip_operand(I, role, t, run.limits)
        require_buffers(I, role, t, ("sbuf",))
    require_same_partitions(I, operands)
    if src.dtype not in (dt.float32, dt.int32):
        fail("operand-dtype", f"{I}: src {describe(src)} must be float32 or int32")
    if dst.dtype is not dt.int32:
        fail("operand-dtype", f"{I}: dst {describe(dst)} must be int32")
    for role, value in (("index_offset", index_offset), ("padding_val", padding_val)):
        if isinstance(value, bool) or not isinstance(value, int) or not (
                -2**31 <= value < 2**31):
            fail("operand-type", f"{I}: {role}={value!r} must be an int32 constant")
    n = elements_per_partition(src)
    if dst.ndim != 2 or src.ndim != 2 or dst.shape[1] != n + 1:
        fail("operand-shape", f"{I}: dst {describe(dst)} must be 2-D with one element more "
             f"per partition than src {describe(src)} (the count), as ({src.shape[0]}, {n + 1})")
    if not run.computes:
        return
    rows = range(0, src.shape[0], GPSIMD_CORE_PARTITIONS)
    x = (int_matrix(src) if src.dtype is dt.int32 else matrix(src))[list(rows)]
    nonzero = x != 0
    count = nonzero.sum(dim=1)
    # A stable sort puts the nonzero positions first, in their order.
    order = torch.sort((~nonzero).to(torch.int8), dim=1, stable=True).indices
    slot = torch.arange(n).reshape(1, -1)
    out = torch.where(slot < count[:, None], order + index_offset,
                      torch.full((), padding_val, dtype=torch.int64))
    out = torch.cat([out, count[:, None]], dim=1)
    for i, p in enumerate(rows):
        dst[p:p + 1, :].write_raw(out[i:i + 1].to(torch.int32), run)
