"""Vector Engine selection and search: range_select (keep the elements whose free index lies in a
per-partition range, with a max-reduction), nc_find_index8 (where 8 values first occur in each
partition) and nc_match_replace8 (replace those occurrences), as nki.isa documents them.

Each partition is searched independently; the 8 values are processed as one vector operation per
value over all partitions, so a search costs 8 passes over the data, not one per partition.
"""

from __future__ import annotations

import torch

from . import dtypes as dt
from .context import current
from .errors import describe
from .isa_common import (check_reduce_res, int_matrix, matrix, require_arch, scalar_or_vector,
                         store)
from .isa_enums import reduce_cmd as ReduceCmd
from .ops import as_op, maximum
from .rules import (elements_per_partition, fail, not_both_psum, on_chip_operand,
                    require_same_free_size, require_same_partitions)

FIND_FREE_RANGE = (8, 16384)  # elements per partition nc_find_index8 searches
_INDEX_DTYPES = (dt.uint16, dt.uint32)
_REDUCE_START = {"maximum": float("-inf"), "minimum": float("inf"), "add": 0.0}


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                 reduce_cmd=ReduceCmd.idle, reduce_res=None, reduce_op=None, range_start=0,
                 on_false_value=0.0, name=None):
    """dst[p, j] = on_true_tile[p, j] where (j + range_start) comp_op0 bound0[p] and
    (j + range_start) comp_op1 bound1[p], else on_false_value; reduce_res gets each
    partition's reduction (max by default) of dst, through the Vector Engine's accumulators."""
    I = "nisa.range_select"
    run = current()
    require_arch(I, "gen3")
    operands = {"dst": dst, "on_true_tile": on_true_tile}
    for role, t in operands.items():
        on_chip_operand(I, role, t, run.limits)
    require_same_partitions(I, operands)
    require_same_free_size(I, operands)
    ops = []
    for role, op in (("comp_op0", comp_op0), ("comp_op1", comp_op1)):
        op = as_op(op, I, role)
        if not op.compare:
            fail("operator", f"{I}: {role}={op!r} must be a comparison (nl.greater_equal, "
                 "nl.less, ...)")
        ops.append(op)
    reduce = as_op(reduce_op, I, "reduce_op") if reduce_op is not None else None
    if reduce is not None and reduce.name not in _REDUCE_START:
        fail("operator", f"{I}: reduce_op={reduce!r} must be nl.maximum, nl.minimum or nl.add")
    reduce = reduce or maximum
    P = on_true_tile.shape[0]
    b0 = scalar_or_vector(I, "bound0", bound0, P, run)
    b1 = scalar_or_vector(I, "bound1", bound1, P, run)
    check_reduce_res(I, reduce_res, P, run)
    if not run.computes:
        return
    x = matrix(on_true_tile)
    index = torch.arange(x.shape[1], dtype=torch.float32).reshape(1, -1) + float(range_start)
    keep = (ops[0].binary(index, b0) != 0) & (ops[1].binary(index, b1) != 0)
    y = torch.where(keep, x, torch.tensor(dt.float32_constant(on_false_value)))
    store(dst, y, run)
    if reduce_res is None and reduce_cmd is ReduceCmd.idle:
        return
    row = reduce.reduce(y, (1,))
    regs = run.vector_regs()
    if reduce_cmd in (ReduceCmd.reset, ReduceCmd.reset_reduce):
        regs[:P] = _REDUCE_START[reduce.name]
    if reduce_cmd in (ReduceCmd.reduce, ReduceCmd.reset_reduce):
        regs[:P] = reduce.binary(regs[:P], row)
    if reduce_res is not None:
        store(reduce_res, (row if reduce_cmd is ReduceCmd.idle else regs[:P]).reshape(P, 1), run)


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=ReduceCmd.idle,
                  reduce_op=None, reverse_pred=False, name=None):
    """dst = where(predicate, on_true, on_false) (predicate negated with reverse_pred), and
    reduce_res the rows' max of dst, through the Vector Engine's accumulators."""
    I = "nisa.select_reduce"
    run = current()
    operands = {"dst": dst, "predicate": predicate, "on_true": on_true}
    for role, t in operands.items():
        on_chip_operand(I, role, t, run.limits)
    require_same_partitions(I, operands)
    require_same_free_size(I, operands)
    not_both_psum(I, "on_true", on_true, "predicate", predicate)
    if predicate.dtype not in (dt.int8, dt.uint8, dt.int16, dt.uint16):
        fail("operand-dtype", f"{I}: predicate {describe(predicate)} must be int8, uint8, int16 "
             "or uint16")
    if on_true.dtype in (dt.tfloat32, dt.int32, dt.uint32):
        fail("operand-dtype", f"{I}: on_true {describe(on_true)} cannot be tfloat32, int32 or "
             "uint32")
    if reduce_op is not None and as_op(reduce_op, I, "reduce_op").name != "maximum":
        fail("operator", f"{I}: reduce_op must be nl.maximum (the only one select_reduce has)")
    P = on_true.shape[0]
    fill = scalar_or_vector(I, "on_false", on_false, P, run, require_f32=True)
    if reduce_res is not None:
        on_chip_operand(I, "reduce_res", reduce_res, run.limits)
        if reduce_res.shape[0] != P or elements_per_partition(reduce_res) != 1 \
                or not reduce_res.dtype.is_float:
            fail("operand-shape", f"{I}: reduce_res {describe(reduce_res)} must be a float "
                 f"({P}, 1) tile")
    if not run.computes:
        return
    keep = int_matrix(predicate) != 0
    if reverse_pred:
        keep = ~keep
    otherwise = fill if torch.is_tensor(fill) else torch.tensor(float(fill))
    y = torch.where(keep, matrix(on_true), otherwise)
    store(dst, y, run)
    if reduce_res is None and reduce_cmd is ReduceCmd.idle:
        return
    row = y.amax(dim=1)
    regs = run.vector_regs()
    if reduce_cmd in (ReduceCmd.reset, ReduceCmd.reset_reduce):
        regs[:P] = float("-inf")
    if reduce_cmd in (ReduceCmd.reduce, ReduceCmd.reset_reduce):
        regs[:P] = torch.maximum(regs[:P], row)
    if reduce_res is not None:
        store(reduce_res, (row if reduce_cmd is ReduceCmd.idle else regs[:P]).reshape(P, 1), run)


def _search_values(t) -> torch.Tensor:
    """Values compared exactly: integers as integers, floats as float32."""
    return int_matrix(t).to(torch.float64) if t.dtype.is_integer else matrix(t).to(torch.float64)


def _check_search(I: str, run, data, vals, outputs: dict) -> None:
    on_chip_operand(I, "data", data, run.limits)
    on_chip_operand(I, "vals", vals, run.limits)
    for role, t in outputs.items():
        on_chip_operand(I, role, t, run.limits)
    require_same_partitions(I, {"data": data, "vals": vals, **outputs})
    not_both_psum(I, "data", data, "vals", vals)
    if elements_per_partition(vals) != 8:
        fail("operand-shape", f"{I}: vals {describe(vals)} must hold exactly 8 values per "
             "partition")
    lo, hi = FIND_FREE_RANGE
    if not lo <= elements_per_partition(data) <= hi:
        fail("operand-shape", f"{I}: data {describe(data)} has {elements_per_partition(data)} "
             f"elements per partition; the Vector Engine searches {lo} to {hi}")


def _positions(data, vals, order) -> tuple[torch.Tensor, torch.Tensor]:
    """For each value (taken in `order`), the first position not taken by an earlier value of
    the order: (positions (P, 8) int64, found (P, 8) bool)."""
    x, v = _search_values(data), _search_values(vals)
    P, F = x.shape
    taken = torch.zeros(P, F, dtype=torch.bool)
    rows = torch.arange(P)
    pos = torch.zeros(P, 8, dtype=torch.int64)
    found = torch.zeros(P, 8, dtype=torch.bool)
    for i in order:
        match = (x == v[:, i:i + 1]) & ~taken
        has = match.any(dim=1)
        first = match.to(torch.uint8).argmax(dim=1)
        taken[rows[has], first[has]] = True
        pos[:, i], found[:, i] = first, has
    return pos, found


def _store_indices(dst, pos, found, run) -> None:
    sentinel = 0xFFFF if dst.dtype is dt.uint16 else 0xFFFFFFFF  # all ones: "not found"
    dst.write(torch.where(found, pos, torch.tensor(sentinel)), run)


def nc_find_index8(dst, data, vals, name=None):
    """dst[p, i] = the position of vals[p, i]'s first occurrence in data[p] (duplicate values
    take successive occurrences, in ascending order); all ones where it does not occur."""
    I = "nisa.nc_find_index8"
    run = current()
    _check_search(I, run, data, vals, {"dst": dst})
    if dst.dtype not in _INDEX_DTYPES or elements_per_partition(dst) != 8:
        fail("operand-dtype", f"{I}: dst {describe(dst)} must be (P, 8) of uint16 or uint32")
    if run.computes:
        pos, found = _positions(data, vals, range(8))
        _store_indices(dst, pos, found, run)


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None):
    """dst = data with the first occurrence of each of the 8 values replaced by imm (values are
    matched from vals[7] down to vals[0], so duplicates pair with descending columns); dst_idx,
    if given, gets the matched positions."""
    I = "nisa.nc_match_replace8"
    run = current()
    outputs = {"dst": dst} | ({"dst_idx": dst_idx} if dst_idx is not None else {})
    _check_search(I, run, data, vals, outputs)
    require_same_free_size(I, {"dst": dst, "data": data})
    if dst_idx is not None and (dst_idx.dtype not in _INDEX_DTYPES
                                or elements_per_partition(dst_idx) != 8):
        fail("operand-dtype", f"{I}: dst_idx {describe(dst_idx)} must be (P, 8) of uint16 or "
             "uint32")
    if not isinstance(imm, (int, float)):
        fail("operand-type", f"{I}: imm={imm!r} must be a compile-time float")
    if not run.computes:
        return
    pos, found = _positions(data, vals, range(7, -1, -1))
    x = matrix(data).clone()  # matrix() may be the memory itself
    rows = torch.arange(x.shape[0]).reshape(-1, 1).expand(-1, 8)
    x[rows[found], pos[found]] = dt.float32_constant(imm)
    store(dst, x, run)
    if dst_idx is not None:
        _store_indices(dst_idx, pos, found, run)
