"""torch.cuda's hardware monitors (NVML's utilization, temperature, power, clock), refused with
what to use instead: the software NeuronCore has no such counters, and a figure made up for
them would mislead the tools that read it."""

from __future__ import annotations

from ._index import _device_t

__all__ = ["utilization", "temperature", "power_draw", "clock_rate", "memory_usage"]


def _refuse(name: str, instead: str):
    raise NotImplementedError(f"torch.neuron.{name}: the neuron device has no hardware counter "
                              f"for it (no NVML); use {instead} instead.")


def utilization(device: _device_t = None) -> int:
    _refuse("utilization", "torch.profiler with ProfilerActivity.PrivateUse1 (device busy time "
                           "per kernel) or torchneuron.profiler.summary()")


def memory_usage(device: _device_t = None) -> int:
    _refuse("memory_usage", "torch.neuron.memory_allocated() / torch.neuron.mem_get_info()")


def temperature(device: _device_t = None) -> int:
    _refuse("temperature", "neuron-monitor on a Trainium host")


def power_draw(device: _device_t = None) -> int:
    _refuse("power_draw", "neuron-monitor on a Trainium host")


def clock_rate(device: _device_t = None) -> int:
    _refuse("clock_rate", "torch.neuron.get_device_properties() for the device's figures")
