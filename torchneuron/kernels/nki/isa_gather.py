"""GpSimd gathers inside SBUF, as nki.isa documents them: nc_n_gather (each partition gathers
from its own flattened free elements) and local_gather (each 16-partition GpSimd core gathers
with one shared list of indices, read from its partitions column by column). Both move bits
unchanged (no dtype cast) and run as one torch gather per instruction."""

from __future__ import annotations

import warnings

import torch

from . import dtypes as dt
from .context import current
from .errors import describe
from .isa_common import GPSIMD_CORE_PARTITIONS
from .rules import elements_per_partition, fail, on_chip_operand, require_same_partitions

LOCAL_GATHER_ELEMENTS = (1, 2, 4, 8, 16, 32)  # num_elem_per_idx values (documented)
LOCAL_GATHER_MAX_INDICES = 4096  # indices per core (documented)


def _sbuf_operands(instr: str, run, operands: dict) -> None:
    for role, t in operands.items():
        on_chip_operand(instr, role, t, run.limits, ("sbuf",))  # GpSimd cannot reach PSUM
    require_same_partitions(instr, operands)


def _same_dtype(instr: str, dst, data, role: str) -> None:
    if dst.dtype is not data.dtype:
        fail("operand-dtype", f"{instr}: dst {describe(dst)} must have {role} {describe(data)}'s "
             "dtype (a gather moves bits, it does not cast)")


def _in_range(instr: str, index: torch.Tensor, indices, limit: int, data, what: str) -> None:
    bad = (index < 0) | (index >= limit)
    if bool(bad.any()):
        p, j = (int(v) for v in bad.nonzero()[0])
        fail("gather-index", f"{instr}: {describe(indices)} holds {int(index[p, j])} (entry {j} of row {p}), "
             f"outside the {limit} {what} of {describe(data)}")


def nc_n_gather(dst, data, indices, name=None):
    """dst[p, :] = data[p].flatten()[indices[p].flatten()], per partition."""
    I = "nisa.nc_n_gather"
    run = current()
    _sbuf_operands(I, run, {"dst": dst, "data": data, "indices": indices})
    _same_dtype(I, dst, data, "data")
    if indices.dtype is not dt.uint32:
        fail("operand-dtype", f"{I}: indices {describe(indices)} must be uint32")
    if elements_per_partition(dst) != elements_per_partition(indices):
        fail("free-size-mismatch", f"{I}: dst {describe(dst)} must hold as many elements per "
             f"partition as indices {describe(indices)}")
    if not run.computes:
        return
    n, P = elements_per_partition(data), data.shape[0]
    index = indices.raw().to(torch.int64).reshape(P, -1)
    _in_range(I, index, indices, n, data, "elements per partition")
    dst.write_raw(data.raw().reshape(P, n).gather(1, index), run)


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    """Per GpSimd core (16 partitions): indices_1d = that core's index slice flattened partition
    first (column-major), cut to num_valid_indices; every partition p of the core gets
    src_buffer[p] viewed as (-1, num_elem_per_idx) rows, taken at indices_1d (the documented
    numpy equivalent)."""
    I = "nisa.local_gather"
    run = current()
    _sbuf_operands(I, run, {"dst": dst, "src_buffer": src_buffer, "index": index})
    _same_dtype(I, dst, src_buffer, "src_buffer")
    if index.dtype is not dt.uint16:
        fail("operand-dtype", f"{I}: index {describe(index)} must be uint16")
    P = src_buffer.shape[0]
    if P % GPSIMD_CORE_PARTITIONS:
        fail("operand-shape", f"{I}: src_buffer {describe(src_buffer)} spans {P} partitions; "
             f"local_gather needs a multiple of {GPSIMD_CORE_PARTITIONS} (one GpSimd core each)")
    if num_elem_per_idx not in LOCAL_GATHER_ELEMENTS:
        fail("operand-shape", f"{I}: num_elem_per_idx={num_elem_per_idx!r} must be one of "
             f"{LOCAL_GATHER_ELEMENTS}")
    per_core = GPSIMD_CORE_PARTITIONS * elements_per_partition(index)
    if num_valid_indices is None:
        # NKI 0.8: without it the results are undefined and NKI warns; a future release's
        # default is dst_free_size / num_elem_per_idx. The simulator keeps reading every index.
        warnings.warn(f"{I}: num_valid_indices omitted; NKI 0.8 leaves the results undefined "
                      "then (the simulator gathers every index of the core's slice); pass it "
                      "explicitly", FutureWarning, stacklevel=3)
    valid = per_core if num_valid_indices is None else num_valid_indices
    if isinstance(valid, bool) or not isinstance(valid, int) or not 1 <= valid <= min(
            per_core, LOCAL_GATHER_MAX_INDICES):
        fail("operand-shape", f"{I}: num_valid_indices={valid!r} must be an integer from 1 to "
             f"{min(per_core, LOCAL_GATHER_MAX_INDICES)} (the indices of one core's 16-partition "
             f"slice of {describe(index)}, at most {LOCAL_GATHER_MAX_INDICES})")
    n = elements_per_partition(src_buffer)
    if n % num_elem_per_idx:
        fail("operand-shape", f"{I}: src_buffer {describe(src_buffer)} has {n} elements per "
             f"partition, not a multiple of num_elem_per_idx={num_elem_per_idx}")
    if elements_per_partition(dst) != valid * num_elem_per_idx:
        fail("free-size-mismatch", f"{I}: dst {describe(dst)} must hold num_valid_indices x "
             f"num_elem_per_idx = {valid * num_elem_per_idx} elements per partition")
    if not run.computes:
        return
    cores = P // GPSIMD_CORE_PARTITIONS
    # (cores, 16, k) -> each core's indices, partition first: transpose to (cores, k, 16).
    idx = index.raw().to(torch.int64).reshape(cores, GPSIMD_CORE_PARTITIONS, -1)
    idx = idx.transpose(1, 2).reshape(cores, -1)[:, :valid]
    rows = n // num_elem_per_idx
    _in_range(I, idx, index, rows, src_buffer,
              f"groups of {num_elem_per_idx} element(s) per partition")
    src = src_buffer.raw().reshape(cores, GPSIMD_CORE_PARTITIONS, rows, num_elem_per_idx)
    take = idx[:, None, :, None].expand(cores, GPSIMD_CORE_PARTITIONS, valid, num_elem_per_idx)
    dst.write_raw(src.gather(2, take).reshape(P, -1), run)
