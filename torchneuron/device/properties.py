"""What a neuron device is: its properties (name, HBM capacity, LogicalNC configuration, peak
FLOP/s and bandwidth from the profile table), compute capability and the dtypes autocast offers."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._C import runtime as _runtime_c
from ..runtime import config as _config
from ._index import _device_index, _device_t

__all__ = ["get_device_properties", "get_device_name", "get_device_capability",
           "get_amp_supported_dtype", "is_bf16_supported"]

@dataclass(frozen=True)
class _NeuronDeviceProperties:
    name: str
    total_memory: int
    neuron_cores_per_chip: int
    logical_nc_config: int
    physical_cores: int  # physical NeuronCores this device spans
    peak_bf16_flops: float
    peak_fp8_flops: float
    memory_bandwidth: float  # bytes/s
    major: int = 0
    minor: int = 0
    multi_processor_count: int = 1
    # The configured HBM capacity exceeds the host memory that backs the software NeuronCore:
    # allocations beyond what the host can provide raise torch.OutOfMemoryError.
    host_memory_limited: bool = False

    def __repr__(self) -> str:
        return (f"_NeuronDeviceProperties(name='{self.name}', total_memory="
                f"{self.total_memory // (1 << 20)}MB, physical_cores={self.physical_cores}, "
                f"logical_nc_config={self.logical_nc_config})")


def get_device_properties(device: _device_t = None) -> _NeuronDeviceProperties:
    index = _device_index(device)
    config = _config.current()
    p, lnc = config.profile, config.logical_nc_config
    return _NeuronDeviceProperties(
        name=get_device_name(index),
        total_memory=_runtime_c.hbm_capacity(index),
        neuron_cores_per_chip=p.neuron_cores_per_chip,
        logical_nc_config=lnc,
        physical_cores=lnc,
        peak_bf16_flops=p.per_device(p.peak_bf16_flops_per_chip, lnc),
        peak_fp8_flops=p.per_device(p.peak_fp8_flops_per_chip, lnc),
        memory_bandwidth=p.per_device(p.hbm_bandwidth_bytes_per_s, lnc),
        multi_processor_count=lnc,
        host_memory_limited=_runtime_c.hbm_capacity(index) > _runtime_c.backing_memory_total(),
    )


def get_device_name(device: _device_t = None) -> str:
    index = _device_index(device)
    config = _config.current()
    core = config.visible_cores[index]
    return f"{config.profile.name} NeuronCore {core} (software, LNC={config.logical_nc_config})"


def get_device_capability(device: _device_t = None) -> tuple[int, int]:
    _device_index(device)
    return (0, 0)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True
