"""How every benchmark here times a call, written once so that their figures stay comparable:
seconds per call over a batch of back-to-back calls, the best of interleaved rounds, medians."""

from __future__ import annotations

import time
from typing import Callable, Hashable, Mapping, TypeVar

Key = TypeVar("Key", bound=Hashable)


def seconds_per_call(fn: Callable[[], object], number: int, clock=time.perf_counter,
                     warmup: bool = False, finish: Callable[[], object] | None = None,
                     keep_results: bool = False) -> float:
    """Seconds per call of `number` back-to-back calls of `fn`, read on `clock`. With `warmup`,
    one untimed call first (first-call initialisation, caches). `finish` runs before the clock
    is read (and after the warm-up): a device's synchronize, so that queued work counts. With
    `keep_results`, every call's return value is held until the clock has been read, as a
    program holds what it computes: a mode that defers work may skip computing a result that
    nothing holds, and a benchmark that drops its results would time less work on that side."""
    if warmup:
        fn()
    if finish is not None:
        finish()
    kept: list[object] = []
    start = clock()
    for _ in range(number):
        result = fn()
        if keep_results:
            kept.append(result)
        del result
    if finish is not None:
        finish()
    seconds = (clock() - start) / number
    kept.clear()  # released outside the timed window
    return seconds


def best_interleaved(fns: Mapping[Key, Callable[[], object]], number: int, rounds: int,
                     clock=time.perf_counter, warmup: bool = False,
                     finish: Mapping[Key, Callable[[], object]] | None = None) -> dict[Key, float]:
    """The best seconds per call of each of `fns` over `rounds` rounds. Each round times every
    function once, in the mapping's order, so that all of them see the same machine load (the
    machine may be shared); the best round is the one least disturbed. `finish[key]`, where
    given, ends each timed batch of that function (see seconds_per_call)."""
    best = {key: float("inf") for key in fns}
    finish = finish or {}
    for _ in range(rounds):
        for key, fn in fns.items():
            best[key] = min(best[key],
                            seconds_per_call(fn, number, clock, warmup, finish.get(key)))
    return best


def median(xs: list[float]) -> float:
    """The middle value (the upper one of an even count), robust to a round that a neighbour
    process disturbed."""
    xs = sorted(xs)
    return xs[len(xs) // 2]
