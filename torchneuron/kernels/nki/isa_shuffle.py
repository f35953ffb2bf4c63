"""nisa.nc_stream_shuffle: the Vector Engine's cross-partition move inside quadrants of 32
partitions. Output partition i of each quadrant copies input partition shuffle_mask[i] of the same
quadrant; 255 leaves it unmodified. One gather over all partitions does the whole move."""

from __future__ import annotations

import torch

from .context import current
from .errors import describe
from .rules import elements_per_partition, fail, on_chip_operand

QUADRANT = 32
KEEP = 255  # shuffle_mask value: leave the output partition unmodified


def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    I = "nisa.nc_stream_shuffle"
    run = current()
    on_chip_operand(I, "src", src, run.limits)
    on_chip_operand(I, "dst", dst, run.limits)
    if dst.dtype is not src.dtype:
        fail("operand-dtype", f"{I}: dst {describe(dst)} must have src's dtype {src.dtype}")
    if elements_per_partition(dst) != elements_per_partition(src):
        fail("free-size-mismatch", f"{I}: dst {describe(dst)} and src {describe(src)} must have "
             "the same elements per partition")
    P = src.shape[0]
    if dst.shape[0] != P:
        fail("partition-mismatch", f"{I}: dst {describe(dst)} spans {dst.shape[0]} partitions "
             f"but src {describe(src)} spans {P}")
    if P > QUADRANT and P % QUADRANT:
        fail("shuffle-partitions", f"{I}: src {describe(src)} spans {P} partitions; a shuffle "
             f"over more than one quadrant covers whole quadrants of {QUADRANT}")
    mask = [int(m) for m in shuffle_mask]
    if len(mask) != QUADRANT:
        fail("shuffle-mask", f"{I}: shuffle_mask has {len(mask)} elements; it must have "
             f"{QUADRANT} (one per partition of a quadrant), for src {describe(src)}")
    active = min(P, QUADRANT)
    for i, m in enumerate(mask[:active]):  # entries past a partial quadrant are unused
        if m != KEEP and not 0 <= m < active:
            fail("shuffle-mask", f"{I}: shuffle_mask[{i}] = {m} is outside the {active} "
                 f"partitions of a quadrant of src {describe(src)} (use 0..{active - 1}, or "
                 f"{KEEP} to leave dst's partition unmodified)")
    if not run.computes:
        return
    source = src.raw().reshape(P, -1).clone()  # in-place shuffles read src before writing
    result = dst.raw().reshape(P, -1).clone()
    for base in range(0, P, QUADRANT):
        rows = [i for i in range(min(QUADRANT, P - base)) if mask[i] != KEEP]
        if rows:
            result[[base + i for i in rows]] = source[[base + mask[i] for i in rows]]
    dst.write_raw(result, run)
