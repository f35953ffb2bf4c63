"""Device memory as the caching allocator sees it: statistics and their peaks, the cache
(empty_cache), free/total memory, the per-process fraction, snapshots and the summary table."""

from __future__ import annotations

import collections
from typing import Any

import torch

from .. import _C
from ._index import _device_index, _device_t
from .properties import get_device_name

__all__ = ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
           "reset_max_memory_allocated", "empty_cache", "mem_get_info",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction",
           "memory_snapshot", "memory_summary"]


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
           *([f"|{f'  configured HBM exceeds the host memory that backs it ({fmt_bytes(host)})':<{width}}|"]
             if (host := _C._backing_memory_total()) < total else []),
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
