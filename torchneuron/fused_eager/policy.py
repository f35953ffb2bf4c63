"""When a chain is compiled: like a JIT, once it was seen `hot` times (NEURON_FUSION_HOT), on a
background thread, never on the caller's. Until its kernel is ready, lookup() returns None and
the queue runs the chain's ops unfused. A chain that fails to compile stays unfused, with one
warning on the caller's thread naming the chain and the error. A chain is kept per device it is
compiled for ("cpu", or "neuron" for the queue: kernels launched on the stream): the same chain
for each device is a different entry, in memory as in Inductor's disk cache.

A thread, not a helper process: Inductor builds the C++ in its own worker processes, so the
compile thread holds the GIL for ~0.1 s of CPU per chain (measured on a 20-op chain; the first
compile of a process, ~1.7 s, loads Inductor)."""

from __future__ import annotations

import os
import queue
import threading
import time
import warnings
import weakref
from collections import Counter
from typing import Callable

from .chain import Chain
from .compiler import CACHE_COUNTERS, CompiledChain, check_device, compile_chain
from .ops import fusion_enabled


class ChainCache:
    """Per-signature hit counts and compiled kernels of one process, keyed by (the chain's
    signature, the device it is compiled for)."""

    def __init__(self, hot: int,
                 compile: Callable[[Chain, int, str], CompiledChain] = compile_chain):
        if hot < 1:
            raise ValueError(f"hot must be at least 1, not {hot}")
        self.hot = hot
        self._compile = compile
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._hits: Counter = Counter()
        self._ready: dict[tuple, CompiledChain] = {}
        self._failed: dict[tuple, str] = {}
        self._unwarned: list[str] = []
        self._pending: set[tuple] = set()
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._lookups = 0
        # A forked child has no compile thread: it starts its own when it needs one.
        # (weakly held: a cache that is gone needs nothing).
        after_fork = weakref.WeakMethod(self._after_fork)
        os.register_at_fork(after_in_child=lambda: (method := after_fork()) and method())

    def lookup(self, chain: Chain, device: str = "cpu") -> CompiledChain | None:
        """The chain's kernel for `device` ("cpu" or "neuron") when it is ready, else None (and
        the hit is counted; the hot-th hit queues its compile). Never blocks on a compile."""
        if not fusion_enabled():
            return None
        signature = (chain.signature(), check_device(device))
        with self._lock:
            self._lookups += 1
            compiled = self._ready.get(signature)
            if compiled is None:
                self._hits[signature] += 1
                if (self._hits[signature] >= self.hot and signature not in self._pending
                        and signature not in self._failed):
                    self._pending.add(signature)
                    self._start_worker()
                    self._work.put((signature, chain))
            unwarned, self._unwarned = self._unwarned, []
        for message in unwarned:
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        return compiled

    def wait(self, timeout: float | None = None) -> bool:
        """Waits until no compile is pending; False if `timeout` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def stats(self) -> dict:
        """Counts of this cache, and what Inductor's disk caches answered its compiles."""
        with self._lock:
            ready = list(self._ready.values())
            result = {"hot": self.hot, "lookups": self._lookups, "chains_seen": len(self._hits),
                      "ready": len(ready), "pending": len(self._pending),
                      "failed": len(self._failed),
                      "compile_seconds": sum(c.compile_seconds for c in ready)}
        for _, name in CACHE_COUNTERS:
            result[name] = sum(c.cache_counts.get(name, 0) for c in ready)
        result["cache_dir"] = cache_dir()
        return result

    def _start_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._run, name="neuron-fusion-compile",
                                            daemon=True)
            self._worker.start()

    def _run(self) -> None:
        while True:
            signature, chain = self._work.get()
            (_, threads), device = signature
            compiled, error = None, None
            try:
                compiled = self._compile(chain, threads, device)
            except Exception as e:  # noqa: BLE001 - a chain that does not compile runs unfused
                error = f"{type(e).__name__}: {e}"
            with self._idle:
                self._pending.discard(signature)
                if compiled is not None:
                    self._ready[signature] = compiled
                else:
                    self._failed[signature] = error
                    self._unwarned.append(
                        f"neuron fusion: a chain of {[str(s.op) for s in chain.steps]} did not "
                        f"compile for {device} and runs unfused: {error}")
                self._idle.notify_all()

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._work = queue.SimpleQueue()
        self._worker = None
        self._pending.clear()


def cache_dir() -> str:
    """Where Inductor's FX graph cache keeps compiled chains (TORCHINDUCTOR_CACHE_DIR, or
    Inductor's default under the temporary directory)."""
    # internal: see runtime/torch_internals.py "torch._inductor.runtime.cache_dir_utils.cache_dir"
    from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

    return os.path.join(inductor_cache_dir(), "fxgraph")


_default: ChainCache | None = None
_default_lock = threading.Lock()


def default_cache() -> ChainCache:
    """The process's cache, with the hotness from the configuration (NEURON_FUSION_HOT)."""
    global _default
    with _default_lock:
        if _default is None:
            from ..runtime import config

            _default = ChainCache(config.current().fusion_hot)
        return _default


def lookup(chain: Chain, device: str = "cpu") -> CompiledChain | None:
    return default_cache().lookup(chain, device)


def stats() -> dict:
    return default_cache().stats()


def wait_for_compiles(timeout: float | None = None) -> bool:
    return default_cache().wait(timeout)
