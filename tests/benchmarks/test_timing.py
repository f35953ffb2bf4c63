"""benchmarks/timing.py: what a timed batch holds. No timing is asserted."""

from __future__ import annotations

import sys
import weakref

from test_adaptive_eager import BENCHMARKS

sys.path.insert(0, BENCHMARKS)
try:
    import timing
finally:
    sys.path.remove(BENCHMARKS)


class Result:
    """A return value whose liveness a weak reference can watch."""


def alive_at_finish(keep_results: bool, number: int = 4) -> tuple[list[bool], list[bool]]:
    refs: list[weakref.ref] = []
    seen: list[bool] = []

    def fn():
        result = Result()
        refs.append(weakref.ref(result))
        return result

    def finish():  # runs before the clock is read
        seen[:] = [ref() is not None for ref in refs]

    timing.seconds_per_call(fn, number, finish=finish, keep_results=keep_results)
    return seen, [ref() is not None for ref in refs]


def test_kept_results_live_until_the_batch_is_timed_then_are_released():
    at_finish, after = alive_at_finish(keep_results=True)
    assert at_finish == [True] * 4  # a deferring mode must compute every one of them
    assert after == [False] * 4


def test_dropped_results_are_released_at_once():
    at_finish, after = alive_at_finish(keep_results=False)
    assert at_finish == [False] * 4
    assert after == [False] * 4
