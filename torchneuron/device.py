"""`torch.neuron`: the device module, shaped like `torch.cuda` so that code and tools written for
CUDA find the same names. Registered with `torch._register_device_module("neuron", ...)`."""

from __future__ import annotations

import collections
import contextlib
from dataclasses import dataclass
from typing import Any, Iterable

import torch

from . import _C
from .runtime import config as _config
from .runtime.streams import (  # noqa: F401  (re-exported as torch.neuron.*)
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

_CONFIG = _config.current()

_device_t = Any  # torch.device | str | int | None, as torch.cuda accepts


# --------------------------------------------------------------------------- devices


def is_available() -> bool:
    return device_count() > 0


def is_initialized() -> bool:
    return _C._is_configured()


def init() -> None:
    """Devices are configured at import of torchneuron; kept for `torch.cuda.init` parity."""


# torch.utils.checkpoint reads this flag (torch.cuda's name) to decide whether to save and
# restore the device's RNG state around a recomputation; without it, dropout in a checkpointed
# block draws a different mask in backward. Devices are configured at import, so it is true.
_initialized = True


def device_count() -> int:
    return _C._device_count()


def _device_index(device: _device_t, optional: bool = True) -> int:
    """The index named by `device` (int, "neuron:1", torch.device), or the current one."""
    if device is None:
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        if device.index is None:
            return current_device()
        device = device.index
    if not isinstance(device, int):
        raise TypeError(f"Expected an int, str or torch.device for a neuron device, got {device!r}")
    _C._check_device(device)
    return device


def current_device() -> int:
    return _C._get_device()


def set_device(device: _device_t) -> None:
    index = _device_index(device)
    _C._set_device(index)


def synchronize(device: _device_t = None) -> None:
    _C._synchronize(_device_index(device))


class device:
    """Context manager that changes the current neuron device (like `torch.cuda.device`)."""

    def __init__(self, device: _device_t):
        self.idx = -1 if device is None else _device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C._set_device(self.idx)
        return self

    def __exit__(self, *exc) -> bool:
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the tensor's neuron device current; no-op for CPU tensors."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else None)


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

    def __repr__(self) -> str:
        return (f"_NeuronDeviceProperties(name='{self.name}', total_memory="
                f"{self.total_memory // (1 << 20)}MB, physical_cores={self.physical_cores}, "
                f"logical_nc_config={self.logical_nc_config})")


def get_device_properties(device: _device_t = None) -> _NeuronDeviceProperties:
    index = _device_index(device)
    p, lnc = _CONFIG.profile, _CONFIG.logical_nc_config
    return _NeuronDeviceProperties(
        name=get_device_name(index),
        total_memory=_C._hbm_capacity(index),
        neuron_cores_per_chip=p.neuron_cores_per_chip,
        logical_nc_config=lnc,
        physical_cores=lnc,
        peak_bf16_flops=p.per_device(p.peak_bf16_flops_per_chip, lnc),
        peak_fp8_flops=p.per_device(p.peak_fp8_flops_per_chip, lnc),
        memory_bandwidth=p.per_device(p.hbm_bandwidth_bytes_per_s, lnc),
        multi_processor_count=lnc,
    )


def get_device_name(device: _device_t = None) -> str:
    index = _device_index(device)
    core = _CONFIG.visible_cores[index]
    return f"{_CONFIG.profile.name} NeuronCore {core} (software, LNC={_CONFIG.logical_nc_config})"


def get_device_capability(device: _device_t = None) -> tuple[int, int]:
    _device_index(device)
    return (0, 0)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


# --------------------------------------------------------------------------- memory


def memory_stats(device: _device_t = None) -> collections.OrderedDict[str, Any]:
    return torch.accelerator.memory_stats(_device_index(device))


def memory_allocated(device: _device_t = None) -> int:
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: _device_t = None) -> int:
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: _device_t = None) -> int:
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: _device_t = None) -> int:
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device: _device_t = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_device_index(device))


def reset_accumulated_memory_stats(device: _device_t = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_device_index(device))


def reset_max_memory_allocated(device: _device_t = None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    _C._empty_cache()


def mem_get_info(device: _device_t = None) -> tuple[int, int]:
    return tuple(_C._mem_get_info(_device_index(device)))


def set_per_process_memory_fraction(fraction: float, device: _device_t = None) -> None:
    if not isinstance(fraction, (int, float)):
        raise TypeError(f"Invalid type for fraction argument, must be float, got {fraction!r}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(float(fraction), _device_index(device))


def get_per_process_memory_fraction(device: _device_t = None) -> float:
    return _C._get_memory_fraction(_device_index(device))


def memory_snapshot() -> list[dict]:
    """Every block the allocator holds: device, address, size, requested_size, allocated."""
    return _C._memory_snapshot()


def memory_summary(device: _device_t = None, abbreviated: bool = False) -> str:
    """A readable table of the allocator's statistics, in the layout of torch.cuda's."""
    index = _device_index(device)
    stats = memory_stats(index)
    free, total = mem_get_info(index)

    def fmt_bytes(n: int) -> str:
        for unit in ("B  ", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:6.0f} {unit}" if unit == "B  " else f"{n:6.2f} {unit}"
            n /= 1024
        return str(n)

    rows = [
        ("Allocated memory", "allocated_bytes", fmt_bytes),
        ("Active memory", "active_bytes", fmt_bytes),
        ("Requested memory", "requested_bytes", fmt_bytes),
        ("Reserved memory", "reserved_bytes", fmt_bytes),
        ("Allocations", "allocation", str),
        ("Active allocs", "active", str),
        ("Device reserved segments", "segment", str),
    ]
    width = 75
    line = "|" + "=" * width + "|"
    out = [line, f"|{' PyTorch neuron memory summary, device ID ' + str(index):<{width}}|",
           f"|{'  ' + get_device_name(index):<{width}}|",
           f"|{f'  free {fmt_bytes(free)} of {fmt_bytes(total)}':<{width}}|",
           f"|{'  alloc retries: ' + str(stats.get('num_alloc_retries', 0)) + '  OOMs: ' + str(stats.get('num_ooms', 0)):<{width}}|",
           line,
           f"| {'Metric':<25}| {'Cur Usage':>10} | {'Peak Usage':>10} | {'Tot Alloc':>10} | {'Tot Freed':>9} |",
           "|" + "-" * width + "|"]
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    for title, key, f in rows:
        for pool in pools:
            name = title if pool == "all" else f"      from {pool.replace('_pool', '')} pool"
            vals = [stats.get(f"{key}.{pool}.{m}", 0) for m in ("current", "peak", "allocated", "freed")]
            out.append(f"| {name:<25}| {f(vals[0]):>10} | {f(vals[1]):>10} | {f(vals[2]):>10} | {f(vals[3]):>9} |")
        out.append("|" + "-" * width + "|")
    out[-1] = line
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- RNG


def default_generators() -> tuple[torch.Generator, ...]:
    return tuple(_C._default_generator(i) for i in range(device_count()))


def _generator(device: _device_t) -> torch.Generator:
    return _C._default_generator(_device_index(device))


def get_rng_state(device: _device_t = "neuron") -> torch.Tensor:
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: _device_t = "neuron") -> None:
    _generator(device).set_state(new_state.clone())


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for gen in default_generators():
        gen.manual_seed(int(seed))


def seed() -> None:
    _generator(None).seed()


def seed_all() -> None:
    first = None
    for gen in default_generators():
        if first is None:
            first = gen.seed()
        else:
            gen.manual_seed(first)


def initial_seed() -> int:
    return _generator(None).initial_seed()
