"""nki.multi_rank_simulate (NKI 0.8): runs a kernel as `world_size` ranks in one process, whose
nki.collectives calls exchange data between the ranks; returns each rank's return value, in rank
order, with its tensors as NumPy arrays.

`per_rank_inputs` gives each rank an (args, kwargs) pair, as a sequence in rank order or a mapping
with one key per rank. Every rank runs the same kernel specialization, so the reference requires
the same parameters on every rank, NumPy arrays of the same shape and dtype (contents may differ)
and equal static arguments; a difference is refused (rule `multi-rank-inputs`) naming the rank and
the parameter. The ranks run on threads, one at a time (ranks.py). A `kernel[n]` launch is refused:
the reference does not say how the cores of a Logical NeuronCore map to ranks here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .errors import NkiUnsupportedError, NkiValidationError
from .execute import as_kernel, numpy_results, require_numpy
from .objects import attributes, is_object
from .ranks import RankSeat, RankWorld


def _world_size(world_size) -> int:
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise TypeError(f"nki.multi_rank_simulate: world_size={world_size!r} must be an int")
    if world_size < 1:
        raise ValueError(f"nki.multi_rank_simulate: world_size={world_size} must be at least 1")
    return world_size


def _rank_inputs(per_rank_inputs, size: int) -> list[tuple[tuple, dict]]:
    api = "nki.multi_rank_simulate"
    if isinstance(per_rank_inputs, Mapping):
        keys = set(per_rank_inputs)
        if keys != set(range(size)):
            raise ValueError(f"{api}: per_rank_inputs has keys {sorted(keys, key=repr)}; a "
                             f"mapping needs one key for each rank 0 to {size - 1}")
        entries = [per_rank_inputs[r] for r in range(size)]
    elif isinstance(per_rank_inputs, Sequence) and not isinstance(per_rank_inputs, str):
        if len(per_rank_inputs) != size:
            raise ValueError(f"{api}: per_rank_inputs has {len(per_rank_inputs)} entries for "
                             f"world_size={size}; it needs one (args, kwargs) pair per rank")
        entries = list(per_rank_inputs)
    else:
        raise TypeError(f"{api}: per_rank_inputs must be a sequence in rank order or a mapping "
                        "from rank to an (args, kwargs) pair")
    for rank, entry in enumerate(entries):
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2
                and isinstance(entry[0], tuple) and isinstance(entry[1], dict)):
            raise TypeError(f"{api}: the input of rank {rank} must be an (args, kwargs) pair, "
                            f"args a tuple and kwargs a dict; got {entry!r}")
    return [(tuple(e[0]), dict(e[1])) for e in entries]


def _difference(a, b, where: str) -> str | None:
    """Where rank inputs a and b differ in what must be equal on every rank, or None."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return f"{where} is a NumPy array on one rank only"
        if a.shape != b.shape or a.dtype != b.dtype:
            return (f"{where} has shape {a.shape} {a.dtype} on rank 0 but {b.shape} {b.dtype} "
                    "(tensor arguments must have one shape and dtype on every rank)")
        return None
    if isinstance(a, (list, tuple)) and type(a) is type(b):
        if len(a) != len(b):
            return f"{where} has {len(a)} items on rank 0 but {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b))
                     if (d := _difference(x, y, f"{where}[{i}]"))), None)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{where} has keys {sorted(a)} on rank 0 but {sorted(b)}"
        return next((d for k in a if (d := _difference(a[k], b[k], f"{where}[{k!r}]"))), None)
    if is_object(a) and type(a) is type(b):  # configurations, ReplicaGroups: field by field
        return _difference(attributes(a), attributes(b), where)
    try:
        equal = bool(a == b)
    except Exception:  # noqa: BLE001 - a value without a truth value of ==: compare identity
        equal = a is b
    if not equal:
        return (f"{where} is {a!r} on rank 0 but {b!r} (static arguments must be equal on every "
                "rank)")
    return None


def _same_specialization(inputs) -> None:
    args0, kwargs0 = inputs[0]
    for rank, (args, kwargs) in enumerate(inputs[1:], start=1):
        if len(args) != len(args0) or set(kwargs) != set(kwargs0):
            raise NkiValidationError(
                "multi-rank-inputs", f"nki.multi_rank_simulate: rank {rank} passes "
                f"{len(args)} positional arguments and keywords {sorted(kwargs)}, rank 0 "
                f"{len(args0)} and {sorted(kwargs0)}; every rank passes the same parameters")
        difference = _difference(args0, args, "args") or _difference(kwargs0, kwargs, "kwargs")
        if difference:
            raise NkiValidationError("multi-rank-inputs", f"nki.multi_rank_simulate: on rank "
                                     f"{rank}, {difference}")


def multi_rank_simulate(kernel, *, world_size, per_rank_inputs) -> list:
    """Runs kernel(*args, **kwargs) as rank r with per_rank_inputs[r]; returns the ranks'
    results in rank order."""
    k = as_kernel(kernel)
    if k.grid:
        raise NkiUnsupportedError(f"nki.multi_rank_simulate of the launch {k.fn.__qualname__}"
                                  f"{list(k.grid)}: how the cores of a Logical NeuronCore map to "
                                  "ranks is not documented; pass the kernel without a grid")
    size = _world_size(world_size)
    inputs = _rank_inputs(per_rank_inputs, size)
    for args, kwargs in inputs:
        require_numpy("nki.multi_rank_simulate", args, kwargs)
    _same_specialization(inputs)
    world = RankWorld(size)
    results: list = [None] * size

    def rank_body(rank: int):
        def body():
            args, kwargs = inputs[rank]
            results[rank] = k.run(args, kwargs, seat=RankSeat(world, rank))
        return body

    try:
        world.run([rank_body(r) for r in range(size)])
    except BaseException as error:
        if world.failed is not None and hasattr(error, "add_note"):
            error.add_note(f"on rank {world.failed} of nki.multi_rank_simulate's {size} "
                           "ranks")
        raise
    return [numpy_results(r) for r in results]
