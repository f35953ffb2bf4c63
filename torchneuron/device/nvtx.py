"""`torch.neuron.nvtx`: torch.cuda.nvtx's ranges and marks, recorded on the device's timeline, so
they appear in torch.profiler traces (ProfilerActivity.PrivateUse1) as annotations on the
neuron row (csrc/profiler/KernelActivity.h). Outside a profiler session they cost a clock read."""

from __future__ import annotations

from contextlib import contextmanager

from .._C import device as _device_c
from .._C import profiler as _profiler_c
from .._C import runtime as _runtime_c

__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]

_open: dict[int, str] = {}  # range_start ids -> their message
_next_id = 0


def _device() -> int:
    return _device_c.get_device() if _runtime_c.is_configured() else 0


def range_push(msg: str) -> int:
    """Opens a nested range; returns its depth (0 for the outermost), as nvtxRangePushA."""
    return _profiler_c.range_push(str(msg), _device())


def range_pop() -> int:
    """Closes the innermost range; returns the depth left, or -1 when none was open."""
    return _profiler_c.range_pop()


def range_start(msg: str) -> int:
    """Opens a range; returns the id range_end takes. Ranges nest per thread: range_end closes
    the innermost range open on the calling thread (torch.cuda's may end on another thread)."""
    global _next_id
    _next_id += 1
    _open[_next_id] = str(msg)
    _profiler_c.range_push(str(msg), _device())
    return _next_id


def range_end(range_id: int) -> None:
    if _open.pop(range_id, None) is None:
        raise ValueError(f"torch.neuron.nvtx.range_end: no open range with id {range_id}")
    _profiler_c.range_pop()


def mark(msg: str) -> None:
    """An instant event on the device's timeline."""
    _profiler_c.mark(str(msg), _device())


@contextmanager
def range(msg: str, *args, **kwargs):
    """`with torch.neuron.nvtx.range("step {}", i):` — msg formatted with args, as torch.cuda's."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
