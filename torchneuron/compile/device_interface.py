"""The Dynamo/Inductor device interface for neuron: how the compiler asks the device for its
count, current index, streams, events and properties. Everything forwards to `torch.neuron`, so
the compiler and user code see the same device state."""

from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, caching_worker_current_devices, \
    caching_worker_device_properties


# internal: see runtime/torch_internals.py "device_interface.DeviceInterface"
class NeuronInterface(DeviceInterface):
    device = torch.neuron.device  # type: ignore[assignment]
    Event = torch.neuron.Event  # type: ignore[assignment]
    Stream = torch.neuron.Stream  # type: ignore[assignment]

    class Worker:
        """Compile workers read properties recorded in the main process (Inductor's protocol);
        on the software device they are cheap to read directly as well."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["neuron"] = device

        @staticmethod
        def current_device() -> int:
            if "neuron" in caching_worker_current_devices:
                return caching_worker_current_devices["neuron"]
            return torch.neuron.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            if device is not None:
                if isinstance(device, str):
                    device = torch.device(device)
                if isinstance(device, torch.device):
                    device = device.index
            if device is None:
                device = NeuronInterface.Worker.current_device()
            cache = caching_worker_device_properties.setdefault("neuron", {})
            if device not in cache:
                cache[device] = torch.neuron.get_device_properties(device)
            return cache[device]

    current_device = staticmethod(torch.neuron.current_device)
    set_device = staticmethod(torch.neuron.set_device)
    device_count = staticmethod(torch.neuron.device_count)
    is_available = staticmethod(torch.neuron.is_available)
    stream = staticmethod(torch.neuron.stream)
    current_stream = staticmethod(torch.neuron.current_stream)
    set_stream = staticmethod(torch.neuron.set_stream)
    synchronize = staticmethod(torch.neuron.synchronize)
    memory_allocated = staticmethod(torch.neuron.memory_allocated)

    @staticmethod
    def exchange_device(device: int) -> int:
        previous = torch.neuron.current_device()
        if device != previous:
            torch.neuron.set_device(device)
        return previous

    maybe_exchange_device = exchange_device

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.neuron.set_stream(torch.neuron.Stream(stream_id=stream_id, device_index=device_index,
                                                    device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return torch.neuron.current_stream(device_idx).stream_id

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> str:
        # Inductor keys its kernel cache on this; the profile name separates trn2 from trn3.
        return torch.neuron.get_device_properties(device).name.split()[0]

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return torch.neuron.is_bf16_supported()

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        # Kernels for neuron come from Inductor's C++ code generation, not Triton.
        return False
