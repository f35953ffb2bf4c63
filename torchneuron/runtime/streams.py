"""Streams and events for neuron, as subclasses of `torch.Stream` / `torch.Event` (the generic
classes route to the C++ DeviceGuardImpl). On the software NeuronCore a kernel finishes before
the call that issued it returns, so stream order always holds and waits never block."""

from __future__ import annotations

from typing import Any

import torch


class Stream(torch.Stream):
    """A neuron stream (`torch.cuda.Stream` counterpart)."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # re-wrapping an existing stream
            return super().__new__(cls, **kwargs)
        with torch.neuron.device(device):
            return super().__new__(cls, device="neuron", priority=priority)

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = Event() if event is None else event
        event.record(self)
        return event


class Event(torch.Event):
    """A neuron event (`torch.cuda.Event` counterpart): timestamps with `enable_timing=True`."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        return super().__new__(cls, device="neuron", enable_timing=enable_timing,
                               blocking=blocking, interprocess=interprocess)

    def record(self, stream: torch.Stream | None = None) -> None:
        super().record(current_stream() if stream is None else stream)

    def wait(self, stream: torch.Stream | None = None) -> None:
        super().wait(current_stream() if stream is None else stream)


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device: Any = None) -> Stream:
    return _wrap(torch.accelerator.current_stream(torch.neuron._device_index(device)))


def default_stream(device: Any = None) -> Stream:
    current = torch.accelerator.current_stream(torch.neuron._device_index(device))
    return Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` current on its device for the body of a `with` block."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.prev: torch.Stream | None = None
        self.prev_device: int | None = None

    def __enter__(self):
        if self.stream is None:
            return self
        self.prev_device = torch.neuron.current_device()
        self.prev = torch.accelerator.current_stream(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)
        return self

    def __exit__(self, *exc) -> bool:
        if self.stream is not None:
            torch.accelerator.set_stream(self.prev)
            torch.neuron.set_device(self.prev_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)
