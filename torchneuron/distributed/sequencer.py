"""Starts a group's checked asynchronous collectives on one thread per group, in call order.

An asynchronous collective (`async_op=True`, and every call DDP's reducer makes from the
backward pass) returns to its caller at once on gloo: the caller goes on computing while gloo
waits for the other ranks. The agreement check (agreement.py) has to hear from every rank before
gloo may start, so run on the caller's thread it would hold the caller until the slowest rank
arrives: DDP's backward would stop at its first gradient bucket. So the check and the start run
here instead, and the caller gets a Work (csrc/DistWork.cpp, DeferredWork) that completes with the
collective, or fails with the check's error.

Order is what keeps ranks matched: collectives of a group start in the order they were called,
so any call made while earlier ones wait here (a synchronous one too) waits its turn.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

import torch
import torch.distributed as dist

_sequencers: dict[str, "Sequencer"] = {}
_lock = threading.Lock()


class Sequencer:
    def __init__(self, group_name: str) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting = 0  # jobs submitted and not yet started on gloo
        self._count_lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True,
                         name=f"neuron-c10d-{group_name}").start()

    def busy(self) -> bool:
        return self._waiting > 0

    def start_later(self, start: Callable[[], Any], done: Callable[[Any], None],
                    failed: Callable[[BaseException], None]) -> None:
        """Runs start() after every collective submitted before it, then done(its result), or
        failed(the error) if it raised."""
        with self._count_lock:
            self._waiting += 1
        self._jobs.put((start, done, failed))

    def start_in_turn(self, start: Callable[[], Any]) -> Any:
        """Runs start() after the collectives already waiting and returns its result (or raises
        its error) to the calling thread."""
        finished = threading.Event()
        outcome: list = []
        self.start_later(start, lambda r: (outcome.append((r, None)), finished.set()),
                         lambda e: (outcome.append((None, e)), finished.set()))
        finished.wait()
        result, error = outcome[0]
        if error is not None:
            raise error
        return result

    def _run(self) -> None:
        # Nothing may end this loop: every later collective of the group would wait forever.
        while True:
            start, done, failed = self._jobs.get()
            try:
                result, error = start(), None
            except BaseException as e:  # noqa: BLE001 - handed to the caller's Work
                result, error = None, e
            with self._count_lock:
                self._waiting -= 1
            try:
                done(result) if error is None else failed(error)
            except BaseException as e:  # noqa: BLE001
                try:
                    failed(e)
                except BaseException:  # noqa: BLE001 - no Work left to tell; keep serving
                    pass


def for_group(group: dist.ProcessGroup) -> Sequencer:
    name = group.group_name
    try:
        return _sequencers[name]
    except KeyError:
        with _lock:
            if name not in _sequencers:
                _sequencers[name] = Sequencer(name)
            return _sequencers[name]


def deferred(sequencer: Sequencer, start: Callable[[], Any]):
    """A Work for the collective that start() will start (start returns that collective's
    Work); the Work fails with start()'s error if it raises."""
    work = torch.ops.torchneuron.deferred_work()
    sequencer.start_later(
        start, lambda started: torch.ops.torchneuron.deferred_work_follow(work, started),
        lambda error: torch.ops.torchneuron.deferred_work_fail(work, str(error)))
    return work
