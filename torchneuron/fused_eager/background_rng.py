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
from typing import Any, ContextManager

from .thread_scoped_patch import ThreadScopedPatch


def _dynamo_utils() -> Any:
    # internal: see runtime/torch_internals.py "torch._dynamo.utils.preserve_rng_state"
    from torch._dynamo import utils as dynamo_utils

    return dynamo_utils


def _leave_rng_state_alone(original: Any) -> ContextManager[None]:
    return contextlib.nullcontext()


_PATCH = ThreadScopedPatch(_dynamo_utils, "preserve_rng_state", _leave_rng_state_alone)


def compiling_in_background() -> ContextManager[None]:
    """Inductor compiles in this block on this thread leave the process's random state alone."""
    return _PATCH.active()
