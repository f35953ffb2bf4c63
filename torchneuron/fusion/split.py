"""Splits a sequence of queued ops into the runs that may fuse: consecutive fusible ops whose
shapes broadcast together, a reduction ending a run. Runs of one op gain nothing and are left
out, and while deterministic algorithms are requested nothing fuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from .ops import fusion_enabled, is_pointwise, is_reduction


@dataclass(frozen=True)
class QueuedOp:
    """What splitting needs of a queued op: the op and the shape it iterates over (its result's
    for a pointwise op, its input's for a reduction)."""
    op: object
    shape: tuple[int, ...]


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None


def split_chains(ops: Sequence[QueuedOp]) -> list[range]:
    """Index ranges of `ops` that form fusible chains, in order, each at least two ops long."""
    if not fusion_enabled():
        return []
    runs: list[range] = []
    start, shape = None, None

    def close(stop: int) -> None:
        if start is not None and stop - start >= 2:
            runs.append(range(start, stop))

    for i, queued in enumerate(ops):
        pointwise, reduction = is_pointwise(queued.op), is_reduction(queued.op)
        if not (pointwise or reduction):
            close(i)
            start, shape = None, None
            continue
        joined = _broadcast(shape, tuple(queued.shape)) if start is not None else None
        if joined is None:  # no open run, or shapes that do not broadcast: a new run starts
            close(i)
            start, joined = i, tuple(queued.shape)
        shape = joined
        if reduction:  # a later op would read the reduced shape
            close(i + 1)
            start, shape = None, None
    close(len(ops))
    return runs
