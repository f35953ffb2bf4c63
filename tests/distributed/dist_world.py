"""A process group of N local worker processes that tests send functions to.

Starting a process costs an `import torch` (seconds on 2 cores), so a test module keeps one world
for all its tests: each `run(fn, *args)` calls `fn(*args)` on every rank and returns the per-rank
results. Workers listen on 127.0.0.1 at a free port, every wait is bounded, and `close()` (or a
timeout, or a dead rank) ends all of them."""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import socket
import tempfile
import traceback
from typing import Any, Callable

DEFAULT_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RankError(RuntimeError):
    """A function raised on one or more ranks; the message holds each rank's traceback."""

    def __init__(self, errors: dict[int, str]):
        self.errors = errors
        super().__init__("\n".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items())))


def init_group(rank: int, size: int, init_method: str, backend: str | None,
               pg_timeout_s: float) -> None:
    """What each worker does first: its own device, then the group (the pattern torchrun users
    follow: set_device(LOCAL_RANK), then init_process_group)."""
    import torch
    import torch.distributed as dist

    torch.neuron.set_device(rank % torch.neuron.device_count())
    kwargs = {} if backend is None else {"backend": backend}
    dist.init_process_group(init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=pg_timeout_s), **kwargs)


def _worker(rank: int, size: int, setup: Callable, setup_args: tuple, conn) -> None:
    try:
        setup(rank, size, *setup_args)
        conn.send(("ok", None))
    except BaseException:
        conn.send(("err", traceback.format_exc()))
        return
    while True:
        msg = conn.recv()
        if msg is None:
            break
        fn, args = msg
        try:
            conn.send(("ok", fn(*args)))
        except BaseException:
            conn.send(("err", traceback.format_exc()))
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


class World:
    def __init__(self, size: int = 2, backend: str | None = "neuron", init: str = "tcp",
                 pg_timeout_s: float = 60.0, setup: Callable | None = None,
                 start_timeout: float = DEFAULT_TIMEOUT):
        self.size = size
        self._tmp = tempfile.TemporaryDirectory(prefix="neuron-dist-")
        if init == "tcp":
            init_method = f"tcp://127.0.0.1:{free_port()}"
        elif init == "file":
            init_method = "file://" + os.path.join(self._tmp.name, "rendezvous")
        else:
            raise ValueError(f"init must be 'tcp' or 'file', got {init!r}")
        self.init_method = init_method
        setup_args = (init_method, backend, pg_timeout_s)
        ctx = mp.get_context("spawn")
        self.procs, self.conns = [], []
        for rank in range(size):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, daemon=True,
                            args=(rank, size, setup or init_group, setup_args, child))
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
        self._collect(start_timeout, "starting the process group")

    def _collect(self, timeout: float, what: str) -> list[Any]:
        deadline = datetime.datetime.now() + datetime.timedelta(seconds=timeout)
        results: dict[int, Any] = {}
        errors: dict[int, str] = {}
        for rank, conn in enumerate(self.conns):
            left = (deadline - datetime.datetime.now()).total_seconds()
            try:
                ready = conn.poll(max(left, 0.0))
                status, value = conn.recv() if ready else ("timeout", None)
            except (EOFError, ConnectionError):
                self.procs[rank].join(timeout=10)
                status, value = "err", f"rank {rank} died (exit code {self.procs[rank].exitcode})"
            if status == "timeout":
                self.close(force=True)
                raise TimeoutError(f"rank {rank} did not finish {what} within {timeout:.0f} s; "
                                   "all ranks were killed")
            if status == "ok":
                results[rank] = value
            else:
                errors[rank] = value
        if errors:
            raise RankError(errors)
        return [results[r] for r in range(self.size)]

    def run(self, fn: Callable, *args, timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
        """fn(*args) on every rank; fn must be a module-level function (it is pickled)."""
        if not self.procs:
            raise RuntimeError("this world is closed")
        for conn in self.conns:
            conn.send((fn, args))
        return self._collect(timeout, getattr(fn, "__name__", "the function"))

    def run_each(self, fn: Callable, *args, timeout: float = DEFAULT_TIMEOUT) -> list[tuple]:
        """Like run, but returns ("ok", value) or ("err", traceback) per rank without raising:
        for tests where ranks are meant to fail."""
        for conn in self.conns:
            conn.send((fn, args))
        out = []
        deadline = datetime.datetime.now() + datetime.timedelta(seconds=timeout)
        for rank, conn in enumerate(self.conns):
            left = (deadline - datetime.datetime.now()).total_seconds()
            try:
                out.append(conn.recv() if conn.poll(max(left, 0.0)) else ("timeout", None))
            except (EOFError, ConnectionError):
                self.procs[rank].join(timeout=10)  # its pipe closes just before it is reaped
                out.append(("died", self.procs[rank].exitcode))
        return out

    def close(self, force: bool = False) -> None:
        for conn, p in zip(self.conns, self.procs):
            if not force and p.is_alive():
                try:
                    conn.send(None)
                except (BrokenPipeError, OSError):
                    pass
        for p in self.procs:
            p.join(timeout=0 if force else 20)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        for conn in self.conns:
            conn.close()
        self.procs, self.conns = [], []
        self._tmp.cleanup()

    def __enter__(self) -> "World":
        return self

    def __exit__(self, *exc) -> None:
        self.close(force=exc[0] is not None)
