"""One thread per process that writes flight-recorder dumps when the main thread cannot: on
SIGUSR2 (a C handler writes to a pipe this thread reads, csrc/distributed/DumpSignal.cpp), and
when another rank reports a failed collective (forensics.py posts it to the rendezvous store,
which this thread polls, as ProcessGroupNCCL's watchdog does). A rank stuck in its own code, or
blocked in a collective, dumps all the same; it also learns the verdict, so that when it reaches
the collective the others gave up on it raises at once, naming the culprit.

Started with the process's first neuron group. Store polls cost one round trip every
POLL_S (a quarter of a second)."""

from __future__ import annotations

import atexit
import datetime
import json
import os
import select
import signal
import socket
import threading

import torch
import torch.distributed as dist

from . import flight_recorder

POLL_S = 0.25
STORE_TIMEOUT_S = 2.0
PREFIX = "torchneuron/fr"
COUNT_KEY = f"{PREFIX}/incidents"

# group name -> the report of the rank that gave up on the group's collective, for this rank
incidents: dict[str, str] = {}
_thread: threading.Thread | None = None
_lock = threading.Lock()
_stop = threading.Event()


def _forget_parent_thread() -> None:
    global _thread, _lock, _stop
    _thread, _lock, _stop = None, threading.Lock(), threading.Event()
    incidents.clear()


os.register_at_fork(after_in_child=_forget_parent_thread)


def root_store(store):
    """The store under a group's PrefixStores: one key space for every group."""
    while hasattr(store, "underlying_store"):
        store = store.underlying_store
    return store


def own_client(store):
    """A connection of this thread's own to the store (a blocked call on the program's would
    hold the program's), with a short timeout: the store's host may be the rank that died."""
    try:
        client = root_store(store).clone()
    except RuntimeError:
        return None
    client.set_timeout(datetime.timedelta(seconds=STORE_TIMEOUT_S))
    return client


def start(store) -> None:
    """Starts the thread (once per process) and the SIGUSR2 handler, if the recorder is on."""
    global _thread
    if _thread is not None or not flight_recorder.enabled():
        return
    with _lock:
        if _thread is not None:
            return
        # -1: the program handles SIGUSR2 itself; its handler stays
        signal_fd = torch.ops.torchneuron.install_dump_signal(int(signal.SIGUSR2))
        _thread = threading.Thread(target=_run, args=(own_client(store), signal_fd),
                                   daemon=True, name="neuron-c10d-watchdog")
        _thread.start()
        atexit.register(stop)


def stop() -> None:
    """Ends the thread before the interpreter does: a thread that comes back from a store call
    (C++, without the GIL) while Python finalizes is ended inside C++, which aborts the process
    ("terminate called without an active exception")."""
    _stop.set()
    if _thread is not None and _thread is not threading.current_thread():
        _thread.join(timeout=STORE_TIMEOUT_S + 2 * POLL_S)


def _dump_quietly(stack_traces: bool = False) -> str | None:
    try:
        return flight_recorder.dump(stack_traces=stack_traces)[0]
    except Exception:  # noqa: BLE001 - a failed dump must not end the watchdog
        return None


def _run(store, signal_fd: int) -> None:
    seen = None
    while not _stop.is_set():
        ready = select.select([signal_fd], [], [], POLL_S)[0] if signal_fd >= 0 else []
        if signal_fd < 0:
            _stop.wait(POLL_S)
        if _stop.is_set():
            return
        if ready:
            os.read(signal_fd, 64)
            _dump_quietly(stack_traces=True)  # asked for by a person: worth the seconds
        if store is None or not dist.is_initialized():
            continue
        try:
            count = store.add(COUNT_KEY, 0)
            if seen is None:
                seen = count  # reports made before this process started are not about it
            while seen < count:
                seen += 1
                _handle(store, seen)
        except Exception:  # noqa: BLE001
            # The store's host is gone (its process ended, often the program's end): stop
            # asking it, once (each failed call logs a warning); signals still work.
            store = None


def _handle(store, number: int) -> None:
    report = json.loads(store.get(f"{PREFIX}/incident/{number}").decode())
    me = dist.get_rank() if dist.is_initialized() else -1
    if me == report["reporter"] or me not in report["ranks"]:
        return
    incidents.setdefault(report["group"], report["message"])
    path = _dump_quietly()
    if path is not None:
        store.set(f"{PREFIX}/incident/{number}/dump/{me}",
                  json.dumps({"path": path, "host": socket.gethostname()}))
