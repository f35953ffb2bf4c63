"""Device activities for work that Python launches (compiled graphs, collectives): timed on the
device clock and handed to the profiler's recorder (csrc/profiler/RecordedActivity.h), which
links them to the CPU op open on this thread. With the profiler off, one call into _C."""

from __future__ import annotations

from typing import Any, Callable

import torch

from .._C import profiler as _profiler_c
from .._C import runtime as _runtime_c

_DTYPE_NAMES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
                torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int",
                torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
                torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}


def _operands(values) -> list[tuple[list[int], str]]:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.device.type == "neuron":
            out.append((list(v.shape), _DTYPE_NAMES.get(v.dtype, str(v.dtype))))
        elif isinstance(v, (list, tuple)):
            out.extend(_operands(v))
    return out


def _device_of(values) -> int:
    for v in values:
        if isinstance(v, torch.Tensor) and v.device.type == "neuron":
            return v.device.index or 0
        if isinstance(v, (list, tuple)) and (d := _device_of(v)) >= 0:
            return d
    return -1


def run_recorded(name: str, run: Callable[[], Any], inputs) -> Any:
    """run(), recorded as one device activity named `name` when a profiler session records."""
    if not _profiler_c.recording():
        return run()
    start = _runtime_c.device_clock_ns()
    result = run()
    end = _runtime_c.device_clock_ns()
    device = _device_of(inputs)
    if device >= 0:
        outputs = result if isinstance(result, (list, tuple)) else [result]
        _profiler_c.record_activity(name, device, start, end, _operands(inputs), _operands(outputs))
    return result
