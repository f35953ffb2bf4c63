"""Starts the checked asynchronous collectives of a backward pass on one thread per group, in
call order.

An asynchronous collective (every call DDP's reducer and FSDP make from their gradient hooks)
returns to its caller at once on gloo: the backward pass goes on computing while gloo waits for
the other ranks. The agreement check (agreement.py) has to hear from every rank before gloo may
start, so run on the caller's thread it would hold the backward pass at each gradient bucket
until the slowest rank got there. So the check and the start run here instead, and the caller
gets a Work (csrc/distributed/DistWork.cpp, DeferredWork) that completes with the collective, or
fails with the check's error.

Order is what keeps ranks matched: gloo pairs the ranks' collectives by the order they reach it.
Collectives of the group on neuron tensors made while earlier ones wait here (a synchronous one
too) wait their turn. A collective on CPU tensors does not pass through torchneuron and would
reach gloo ahead of the waiting ones, on one rank and not the other; that is why only calls made
during a backward pass are deferred (gradient hooks issue no CPU collectives), and the backward
pass ends only once all of them reached gloo (an engine callback, as DDP finalizes its buckets
with). Elsewhere an asynchronous collective is checked on the caller's thread, as a synchronous
one is.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable

import torch
import torch.distributed as dist

from . import agreement, agreement_channel

_sequencers: dict[str, "Sequencer"] = {}
_lock = threading.Lock()


def _forget_parent_threads() -> None:
    """In a forked child the sequencing threads do not exist and `_lock` may have been held by
    one of them: start from nothing (the child cannot use the parent's groups anyway)."""
    global _lock
    _lock = threading.Lock()
    _sequencers.clear()


os.register_at_fork(after_in_child=_forget_parent_threads)


class Sequencer:
    def __init__(self, group_name: str) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting = 0  # jobs submitted and not yet started on gloo
        self._waiting_changed = threading.Condition()
        self._drain_queued_for = -1  # the backward pass that drains this sequencer at its end
        threading.Thread(target=self._run, daemon=True,
                         name=f"neuron-c10d-{group_name}").start()

    def busy(self) -> bool:
        return self._waiting > 0

    def drain(self) -> None:
        """Returns once every submitted collective has started on gloo."""
        with self._waiting_changed:
            self._waiting_changed.wait_for(lambda: self._waiting == 0)

    def drain_when_backward_ends(self) -> None:
        """Called during a backward pass: at its end (as DDP finalizes its buckets), wait until
        everything deferred here has reached gloo, so that collectives the program makes after
        the backward pass, on CPU tensors too, reach gloo after them on every rank."""
        # internal: see runtime/torch_internals.py "torch._C._current_graph_task_id"
        # internal: see runtime/torch_internals.py "_execution_engine.queue_callback"
        task = torch._C._current_graph_task_id()
        if task != -1 and self._drain_queued_for != task:
            self._drain_queued_for = task
            torch.autograd.Variable._execution_engine.queue_callback(self.drain)

    def start_later(self, start: Callable[[], Any], done: Callable[[Any], None],
                    failed: Callable[[BaseException], None]) -> None:
        """Runs start() after every collective submitted before it, then done(its result), or
        failed(the error) if it raised."""
        with self._waiting_changed:
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
            with self._waiting_changed:
                self._waiting -= 1
                self._waiting_changed.notify_all()
            try:
                done(result) if error is None else failed(error)
            except BaseException as e:  # noqa: BLE001
                try:
                    failed(e)
                except BaseException:  # noqa: BLE001 - no Work left to tell; keep serving
                    pass


def existing(group: dist.ProcessGroup) -> Sequencer | None:
    """The group's sequencer if a collective was ever deferred in it (None: nothing can wait)."""
    return _sequencers.get(group.group_name)


def for_group(group: dist.ProcessGroup) -> Sequencer:
    """The group's sequencer, made (with its thread) at the first deferred collective."""
    name = group.group_name
    try:
        return _sequencers[name]
    except KeyError:
        with _lock:
            if name not in _sequencers:
                _sequencers[name] = Sequencer(name)
            return _sequencers[name]


def defers(op_name: str, group: dist.ProcessGroup) -> bool:
    """Whether an asynchronous call of op_name starts here: checked, and made during a backward
    pass. The group's check channel is made first, on the caller's thread (setting it up takes
    gloo collectives, which must not run beside the caller's; nothing of the group waits here
    yet, since only checked collectives do, and each needs the channel)."""
    # internal: see runtime/torch_internals.py "torch._C._current_graph_task_id"
    if torch._C._current_graph_task_id() == -1 or not agreement.will_check(op_name, group):
        return False
    agreement_channel.channel_for(group)
    return True


def deferred(sequencer: Sequencer, start: Callable[[], Any]):
    """A Work for the collective that start() will start (start returns that collective's
    Work); the Work fails with start()'s error if it raises."""
    work = torch.ops.torchneuron.deferred_work()
    sequencer.drain_when_backward_ends()
    sequencer.start_later(
        start, lambda started: torch.ops.torchneuron.deferred_work_follow(work, started),
        lambda error: torch.ops.torchneuron.deferred_work_fail(work, str(error)))
    return work
