"""The compile thread must not touch the caller's random state.

Inductor saves the process's CPU random state before it compiles a graph and restores it after
(`torch._dynamo.utils.preserve_rng_state`, entered by compile_fx). On fused mode's compile thread
that restore rewinds every random number the caller's thread drew meanwhile: a CPU model
initialized while a chain compiled got other weights than the same seed gives without fusion
(the demo's first loss moved by 2%). The graphs the compile thread compiles are pointwise ops and
reductions, which draw nothing, so on that thread the save and restore are skipped; every other
thread (a user's torch.compile) keeps Inductor's behaviour.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

_local = threading.local()


@contextlib.contextmanager
def compiling_in_background() -> Iterator[None]:
    """Inductor compiles in this block on this thread leave the process's random state alone."""
    _install()
    _local.active = True
    try:
        yield
    finally:
        _local.active = False


def _install() -> None:
    # internal: see runtime/torch_internals.py "torch._dynamo.utils.preserve_rng_state"
    from torch._dynamo import utils as dynamo_utils

    original = dynamo_utils.preserve_rng_state
    if getattr(original, "_torchneuron_thread_aware", False):
        return

    @contextlib.contextmanager
    def preserve_rng_state() -> Iterator[None]:
        if getattr(_local, "active", False):
            yield
            return
        with original():
            yield

    preserve_rng_state._torchneuron_thread_aware = True  # type: ignore[attr-defined]
    dynamo_utils.preserve_rng_state = preserve_rng_state
