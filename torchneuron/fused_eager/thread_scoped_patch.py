"""A patch of a PyTorch function that takes effect only on threads inside its `active()` block.

Fused mode changes how Inductor compiles its chains (background_rng.py, vector_interleave.py)
without changing a user's torch.compile on any other thread: the function is replaced once by a
wrapper that calls the patched behaviour where this thread is inside `active()` and the original
everywhere else.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Iterator


class ThreadScopedPatch:
    """`owner.name` replaced, on install(), by a wrapper calling `when_active(original, *args)` on
    threads inside active() and `original(*args)` elsewhere. The replacement happens once per
    process (a second install finds the wrapper); owner's attribute must be read at call time by
    its callers for the wrapper to be seen."""

    def __init__(self, owner: Callable[[], Any], name: str,
                 when_active: Callable[..., Any]) -> None:
        self._owner = owner  # imports lazily: the owner module is Inductor's, loaded on first use
        self._name = name
        self._when_active = when_active
        self._local = threading.local()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        self._install()
        previous = getattr(self._local, "active", False)
        self._local.active = True
        try:
            yield
        finally:
            self._local.active = previous

    def _install(self) -> None:
        owner = self._owner()
        original = getattr(owner, self._name)
        if getattr(original, "_torchneuron_thread_scoped", False):
            return
        local, when_active = self._local, self._when_active

        @functools.wraps(original)  # keeps its name and signature for torch_internals' checks
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if getattr(local, "active", False):
                return when_active(original, *args, **kwargs)
            return original(*args, **kwargs)

        wrapper._torchneuron_thread_scoped = True  # type: ignore[attr-defined]
        setattr(owner, self._name, wrapper)
