"""Helpers the ISA instructions share: operands as (partition, free) float32 matrices, scalar or
per-partition operands, and the engines' memory rules."""

from __future__ import annotations

import numbers

import torch

from . import dtypes as dt
from .context import current
from .errors import describe
from .isa_enums import engine
from .rules import elements_per_partition, fail, on_chip_operand
from .tensor import NkiTensor

# Each of the GpSimd Engine's 8 cores is wired to 16 contiguous SBUF partitions (nki.isa's
# local_gather and nonzero_with_count documentation).
GPSIMD_CORE_PARTITIONS = 16


def matrix(t: NkiTensor) -> torch.Tensor:
    """The view's values in float32 as (partitions, elements per partition)."""
    return t.read_f32().reshape(t.shape[0], elements_per_partition(t))


def int_matrix(t: NkiTensor) -> torch.Tensor:
    return t.raw().to(torch.int64).reshape(t.shape[0], elements_per_partition(t))


def store(dst: NkiTensor, values: torch.Tensor, run) -> None:
    dst.write(values.reshape(dst.shape), run)


def is_scalar(value) -> bool:
    """A compile-time constant (Python or numpy number, bool included)."""
    return isinstance(value, numbers.Number)


def scalar_or_vector(instr: str, role: str, value, partitions: int, run,
                     require_f32: bool = False):
    """A compile-time scalar (float) or a (partitions, 1) tile (as a float32 column)."""
    if value is None:
        return None
    if isinstance(value, NkiTensor):
        on_chip_operand(instr, role, value, run.limits)
        if value.shape[0] != partitions or elements_per_partition(value) != 1:
            fail("operand-shape", f"{instr}: {role} {describe(value)} must be a scalar or a "
                 f"({partitions}, 1) tile: one value per partition of the data")
        if require_f32 and value.dtype is not dt.float32:
            fail("operand-dtype", f"{instr}: {role} {describe(value)} must be float32 (the "
                 "engines take per-partition operands of arithmetic operators in float32)")
        return matrix(value) if run.computes else None
    if is_scalar(value):
        return float(value)
    fail("operand-type", f"{instr}: {role}={value!r} must be a compile-time scalar or a "
         f"({partitions}, 1) tile")


def check_reduce_res(instr: str, reduce_res, partitions: int, run) -> None:
    """The reduction result of an instruction that reduces each partition (activation,
    activate2, range_select): None, or an on-chip (partitions, 1) tile, one value each."""
    if reduce_res is None:
        return
    on_chip_operand(instr, "reduce_res", reduce_res, run.limits)
    if reduce_res.shape[0] != partitions or elements_per_partition(reduce_res) != 1:
        fail("operand-shape", f"{instr}: reduce_res {describe(reduce_res)} must be "
             f"({partitions}, 1)")


def require_engine_reach(instr: str, eng, operands: dict) -> None:
    """GpSimd Engine cannot access PSUM (the architecture guide's engine/memory table)."""
    if eng is engine.gpsimd:
        for role, t in operands.items():
            if isinstance(t, NkiTensor) and t.buffer.kind == "psum":
                fail("gpsimd-psum", f"{instr}: {role} {describe(t)} is in PSUM, which the "
                     "GpSimd Engine cannot access")


def require_integer(instr: str, operands: dict, why: str) -> None:
    for role, t in operands.items():
        if isinstance(t, NkiTensor) and not t.dtype.is_integer:
            fail("operand-dtype", f"{instr}: {role} {describe(t)} must have an integer dtype: "
                 f"{why}")


def require_arch(instr: str, minimum: str) -> None:
    run = current()
    order = {"gen2": 2, "gen3": 3, "gen4": 4}
    if order[run.limits.nc_version] < order[minimum]:
        fail("architecture", f"{instr} needs NeuronCore-v{order[minimum]} ({minimum}); the "
             f"selected profile {run.limits.profile} is {run.limits.nc_version}")


def as_engine(instr: str, value) -> engine:
    if value is None:
        return engine.unknown
    if isinstance(value, engine):
        return value
    fail("operand-type", f"{instr}: engine={value!r} is not an nki.isa.engine")
