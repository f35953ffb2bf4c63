"""Reductions: tensor_reduce (free axes), tensor_partition_reduce (across partitions),
tensor_scalar_reduce, bn_stats/bn_aggr (mean and variance) and max8."""

from __future__ import annotations

import math

import torch

from .context import current
from .errors import describe
from .isa_common import matrix, require_integer, scalar_or_vector, store
from .isa_enums import reduce_cmd as ReduceCmd
from .ops import as_op
from .rules import (BN_STATS_FMAX, elements_per_partition, fail, on_chip_operand,
                    require_same_partitions)


def _reduce_axes(instr: str, data, axis) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(sorted(a + data.ndim if a < 0 else a for a in axes))
    if 0 in axes:
        fail("partition-reduce", f"{instr}: axis {axis} includes the partition dimension of "
             f"{describe(data)}; engines reduce free axes only (transpose first, or use "
             "nc_matmul with a ones vector)")
    if not axes or axes != tuple(range(data.ndim - len(axes), data.ndim)):
        fail("reduce-axes", f"{instr}: axis {axis} of {describe(data)} must be the last "
             "contiguous free dimension(s), ending at the final dimension")
    return axes


def _dst_and_data(instr: str, run, dst, data, data_role: str = "data") -> None:
    """The checks of a one-input instruction: both on chip, same partitions."""
    for role, t in (("dst", dst), (data_role, data)):
        on_chip_operand(instr, role, t, run.limits)
    require_same_partitions(instr, {"dst": dst, data_role: data})


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    I = "nisa.tensor_reduce"
    run = current()
    op = as_op(op, I)
    if op.reduce is None:
        fail("operator", f"{I}: op={op!r} is not a legal reduction operator")
    for role, t in (("dst", dst), ("data", data)):
        on_chip_operand(I, role, t, run.limits)
    axes = _reduce_axes(I, data, axis)
    require_same_partitions(I, {"dst": dst, "data": data})
    kept = math.prod(data.shape[1:data.ndim - len(axes)])
    if elements_per_partition(dst) != kept:
        fail("free-size-mismatch", f"{I}: reducing axes {axes} of {describe(data)} leaves "
             f"{kept} elements per partition, but dst {describe(dst)} has "
             f"{elements_per_partition(dst)}")
    if op.kind == "bitvec":
        require_integer(I, {"dst": dst, "data": data}, f"{op!r} is a bitvec operator")
        if negate:
            fail("operator", f"{I}: negate applies to arithmetic operators only")
    if not run.computes:
        return
    if op.kind == "bitvec":
        result = op.reduce(data.raw().to(torch.int64), axes)
        dst.write_raw(result.to(dst.dtype.storage).reshape(dst.shape), run)
        return
    result = op.reduce(data.read_f32(), axes)
    if negate:
        result = -result
    store(dst, result.reshape(dst.shape[0], -1), run)


def tensor_partition_reduce(dst, op, data, name=None):
    I = "nisa.tensor_partition_reduce"
    run = current()
    op = as_op(op, I)
    if op.name not in ("add", "maximum", "bitwise_or", "bitwise_and"):
        fail("operator", f"{I}: op must be nl.add, nl.maximum, nl.bitwise_or or nl.bitwise_and")
    for role, t in (("dst", dst), ("data", data)):
        on_chip_operand(I, role, t, run.limits, ("sbuf",))  # GpSimd: no PSUM
    if dst.shape[0] != 1 or elements_per_partition(dst) != elements_per_partition(data):
        fail("operand-shape", f"{I}: dst {describe(dst)} must be one partition with the "
             f"{elements_per_partition(data)} elements of each partition of data")
    if not run.computes:
        return
    x = matrix(data)
    result = op.reduce(x.T, (1,)) if op.kind == "arith" else op.reduce(
        data.raw().to(torch.int64).reshape(data.shape[0], -1).T, (1,))
    store(dst, result.reshape(1, -1), run)


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0=False,
                         reduce_cmd=ReduceCmd.reset_reduce, reduce_init=None, name=None):
    I = "nisa.tensor_scalar_reduce"
    run = current()
    op0, reduce_op = as_op(op0, I, "op0"), as_op(reduce_op, I, "reduce_op")
    if op0.kind != "arith":
        fail("operator", f"{I}: op0={op0!r} must be an arithmetic operator")
    if reduce_op.name not in ("add", "multiply", "maximum", "minimum"):
        fail("operator", f"{I}: reduce_op must be nl.add, nl.multiply, nl.max or nl.min")
    if reverse0:
        fail("operator", f"{I}: reverse0 is not supported by the instruction (documented)")
    if (reduce_cmd is ReduceCmd.load_reduce) != (reduce_init is not None):
        fail("operand-shape", f"{I}: reduce_init is given exactly when reduce_cmd is load_reduce")
    for role, t in (("dst", dst), ("data", data), ("reduce_res", reduce_res)):
        on_chip_operand(I, role, t, run.limits)
    require_same_partitions(I, {"dst": dst, "data": data, "reduce_res": reduce_res})
    if elements_per_partition(reduce_res) != 1:
        fail("operand-shape", f"{I}: reduce_res {describe(reduce_res)} must hold one element "
             "per partition")
    P = data.shape[0]
    v0 = scalar_or_vector(I, "operand0", operand0, P, run, require_f32=True)
    if not run.computes:
        return
    y = op0.binary(matrix(data), v0) if op0.unary is None else op0.unary(matrix(data))
    store(dst, y, run)
    part = reduce_op.reduce(y, (1,))
    regs = run.vector_regs()
    if reduce_cmd is ReduceCmd.reset_reduce:
        regs[:P] = part
    elif reduce_cmd is ReduceCmd.load_reduce:
        regs[:P] = reduce_op.binary(torch.full((P,), float(reduce_init)), part)
    else:
        regs[:P] = reduce_op.binary(regs[:P], part)
    store(reduce_res, regs[:P].reshape(P, 1), run)


def bn_stats(dst, data, name=None):
    I = "nisa.bn_stats"
    run = current()
    _dst_and_data(I, run, dst, data)
    n = elements_per_partition(data)
    if n > BN_STATS_FMAX:
        fail("bn-stats-size", f"{I}: data {describe(data)} has {n} elements per partition; "
             f"bn_stats takes at most {BN_STATS_FMAX} (nl.tile_size.bn_stats_fmax)")
    if elements_per_partition(dst) != 6:
        fail("operand-shape", f"{I}: dst {describe(dst)} must hold 6 elements per partition")
    if not run.computes:
        return
    x = matrix(data)
    stats = []
    for half in (x[:, 0::2], x[:, 1::2]):
        count = half.shape[1]
        mean = half.mean(dim=1) if count else torch.zeros(x.shape[0])
        m2 = ((half - mean[:, None]) ** 2).sum(dim=1) if count else torch.zeros(x.shape[0])
        stats += [torch.full((x.shape[0],), float(count)), mean, m2]
    store(dst, torch.stack(stats, dim=1), run)


def bn_aggr(dst, data, name=None):
    I = "nisa.bn_aggr"
    run = current()
    _dst_and_data(I, run, dst, data)
    n = elements_per_partition(data)
    if n % 3:
        fail("operand-shape", f"{I}: data {describe(data)} has {n} elements per partition, not "
             "(count, mean, variance*count) triples")
    if elements_per_partition(dst) != 2:
        fail("operand-shape", f"{I}: dst {describe(dst)} must hold 2 elements per partition "
             "(mean, variance)")
    if not run.computes:
        return
    triples = matrix(data).reshape(data.shape[0], -1, 3)
    count, mean, m2 = triples[..., 0], triples[..., 1], triples[..., 2]
    total = count.sum(dim=1)
    grand = (count * mean).sum(dim=1) / total
    var = (m2 + count * (mean - grand[:, None]) ** 2).sum(dim=1) / total
    store(dst, torch.stack([grand, var], dim=1), run)


def max8(dst, src, name=None):
    I = "nisa.max8"
    run = current()
    _dst_and_data(I, run, dst, src, "src")
    n = elements_per_partition(src)
    if not 8 <= n <= 16384:
        fail("operand-shape", f"{I}: src {describe(src)} has {n} elements per partition; "
             "max8 reads 8 to 16384")
    if elements_per_partition(dst) != 8:
        fail("operand-shape", f"{I}: dst {describe(dst)} must hold 8 elements per partition")
    if run.computes:
        store(dst, matrix(src).topk(8, dim=1).values, run)
