"""Streams and events for neuron: PyTorch's own `torch.Stream` / `torch.Event` on the neuron
device (the C++ DeviceGuardImpl serves them), built the way `torch.cuda.Stream` / `torch.cuda.Event`
are, plus the current/default stream and the `stream` context manager."""

# On the software NeuronCore a kernel finishes before the call that issued it returns, so stream
# order always holds and waits never block; the generic classes still mix freely with
# device-generic code.

from __future__ import annotations

from typing import Any

import torch

from .._C import device as _device_c
from ._index import _device_index

__all__ = ["Stream", "Event", "StreamContext", "stream", "current_stream", "default_stream",
           "set_stream"]


class _OnNeuron(type):
    """isinstance(x, torch.neuron.Stream) holds for every torch.Stream on a neuron device."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.generic) and obj.device.type == "neuron"


class Stream(metaclass=_OnNeuron):
    """`torch.neuron.Stream(device=None, priority=0)`: a new stream on a neuron device."""

    generic = torch.Stream

    def __new__(cls, device: Any = None, priority: int = 0) -> torch.Stream:
        index = _device_index(device)
        return torch.Stream(device=torch.device("neuron", index), priority=priority)


class Event(metaclass=_OnNeuron):
    """`torch.neuron.Event(enable_timing=False, ...)`: an event; timing needs enable_timing."""

    generic = torch.Event

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False) -> torch.Event:
        return torch.Event(device=torch.device("neuron", _device_c.get_device()),
                           enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)


def current_stream(device: Any = None) -> torch.Stream:
    return torch.accelerator.current_stream(_device_index(device))


def default_stream(device: Any = None) -> torch.Stream:
    current = current_stream(device)
    return torch.Stream(stream_id=0, device_index=current.device_index,
                        device_type=current.device_type)


def set_stream(stream: torch.Stream | None) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` current (and its device current) for the body of a `with` block."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.prev_stream: torch.Stream | None = None
        self.prev_device: int | None = None

    def __enter__(self):
        if self.stream is not None:
            self.prev_device = _device_c.get_device()
            self.prev_stream = current_stream(self.stream.device_index)
            torch.accelerator.set_stream(self.stream)
        return self

    def __exit__(self, *exc) -> bool:
        if self.stream is not None:
            torch.accelerator.set_stream(self.prev_stream)
            _device_c.set_device(self.prev_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)
