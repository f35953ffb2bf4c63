"""The tail of a neuron out-of-memory message, from Python: the allocator calls one hook
(torchneuron._C.profiler.set_oom_hook) after its CUDA-like message, with the device, the size of
the request that failed and the bytes usable there; this module makes that hook the concatenation
of every tail registered here (the OOM snapshot writer, the memory advisor), in order."""

from __future__ import annotations

from typing import Callable

from .._C import profiler as _profiler_c

_tails: list[Callable[[int, int, int], str]] = []


def _message_tail(device: int, size: int, usable: int) -> str:
    parts = []
    for tail in _tails:
        try:
            parts.append(tail(device, size, usable))
        except Exception as e:  # a failing tail must not hide the out-of-memory error itself
            parts.append(f" ({getattr(tail, '__name__', 'a tail')} failed: {e!r})")
    return "".join(parts)


def add_tail(tail: Callable[[int, int, int], str]) -> None:
    """Appends `tail(device, size, usable) -> str` to every neuron out-of-memory message from now on."""
    if not callable(tail):
        raise TypeError(f"an out-of-memory message tail must be callable, got {tail!r}")
    if tail not in _tails:
        _tails.append(tail)
    _profiler_c.set_oom_hook(_message_tail)
