"""Device memory as the caching allocator sees it: statistics and their peaks, the cache
(empty_cache), free/total memory, the per-process fraction, snapshots and the summary table."""

from __future__ import annotations

import collections
from typing import Any

import torch

from .._C import device as _device_c
from .._C import runtime as _runtime_c
from ._index import _device_index, _device_t
from ._memory_history import (  # noqa: F401  (torch.cuda.memory's private names)
    apply_oom_snapshot_setting, _dump_snapshot, _record_memory_history, _snapshot)
from .memory_breakdown import fmt
from .memory_explain import explain, install_oom_advice  # noqa: F401  (torch.neuron.memory.explain)
from .properties import get_device_name

__all__ = ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
           "reset_max_memory_allocated", "empty_cache", "mem_get_info",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction",
           "memory_snapshot", "memory_summary", "caching_allocator_alloc",
           "caching_allocator_delete", "get_allocator_backend", "host_memory_stats",
           "list_gpu_processes", "list_processes", "memory_stats_as_nested_dict",
           "memory_cached", "max_memory_cached", "reset_max_memory_cached", "device_memory_used",
           "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats",
           "reset_peak_host_memory_stats"]


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
    _device_c.empty_cache()


def mem_get_info(device: _device_t = None) -> tuple[int, int]:
    return tuple(_device_c.mem_get_info(_device_index(device)))


def set_per_process_memory_fraction(fraction: float, device: _device_t = None) -> None:
    if not isinstance(fraction, (int, float)):
        raise TypeError(f"Invalid type for fraction argument, must be float, got {fraction!r}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _device_c.set_memory_fraction(float(fraction), _device_index(device))


def get_per_process_memory_fraction(device: _device_t = None) -> float:
    return _device_c.get_memory_fraction(_device_index(device))


def memory_snapshot() -> list[dict]:
    """Every block the allocator holds: device, address, size, requested_size, allocated."""
    return _device_c.memory_snapshot()


def memory_summary(device: _device_t = None, abbreviated: bool = False) -> str:
    """A readable table of the allocator's statistics, in the layout of torch.cuda's."""
    index = _device_index(device)
    stats = memory_stats(index)
    free, total = mem_get_info(index)

    def fmt_bytes(n: int) -> str:
        return fmt(n, width=6)

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
             if (host := _runtime_c.backing_memory_total()) < total else []),
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


def memory_stats_as_nested_dict(device: _device_t = None) -> dict[str, Any]:
    """memory_stats() with its dotted keys as nested dicts, as torch.cuda's."""
    nested: dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        node = nested
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def memory_cached(device: _device_t = None) -> int:
    """Deprecated name of memory_reserved() (as in torch.cuda)."""
    return memory_reserved(device)


def max_memory_cached(device: _device_t = None) -> int:
    """Deprecated name of max_memory_reserved() (as in torch.cuda)."""
    return max_memory_reserved(device)


def reset_max_memory_cached(device: _device_t = None) -> None:
    reset_peak_memory_stats(device)


def device_memory_used(device: _device_t = None) -> int:
    """Device memory in use by every process, in bytes (capacity less what is free)."""
    free, total = mem_get_info(device)
    return total - free


# Blocks handed out by caching_allocator_alloc, by address: the tensors that own them.
_raw_blocks: dict[int, torch.Tensor] = {}


def caching_allocator_alloc(size: int, device: _device_t = None, stream=None) -> int:
    """`size` bytes from the caching allocator; returns the address (free it with
    caching_allocator_delete). `stream` is accepted as torch.cuda's is: the software NeuronCore
    runs every stream's work in order on the issuing thread."""
    if not isinstance(size, int) or size < 0:
        raise TypeError(f"size must be a non-negative int, got {size!r}")
    block = torch.empty(size, dtype=torch.uint8, device=torch.device("neuron", _device_index(device)))
    _raw_blocks[block.data_ptr()] = block
    return block.data_ptr()


def caching_allocator_delete(mem_ptr: int) -> None:
    """Returns a block from caching_allocator_alloc to the allocator's cache."""
    if _raw_blocks.pop(mem_ptr, None) is None:
        raise ValueError(f"neuron: {mem_ptr:#x} was not allocated by caching_allocator_alloc")


def get_allocator_backend() -> str:
    """The allocator's name, as torch.cuda's ("native": torchneuron's caching allocator)."""
    return "native"


def _no_host_pool(name: str):
    raise NotImplementedError(
        f"torch.neuron.{name}: the neuron backend has no pinned host memory pool "
        "(pin_memory() uses the CPU's allocator); use torch.neuron.memory_stats() for device "
        "memory and the process's own tools (psutil) for host memory.")


def host_memory_stats() -> dict[str, Any]:
    _no_host_pool("host_memory_stats")


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    _no_host_pool("host_memory_stats_as_nested_dict")


def reset_accumulated_host_memory_stats() -> None:
    _no_host_pool("reset_accumulated_host_memory_stats")


def reset_peak_host_memory_stats() -> None:
    _no_host_pool("reset_peak_host_memory_stats")


def list_processes(device: _device_t = None) -> str:
    """The processes using the device and their memory, as torch.cuda.list_gpu_processes
    prints it. The software NeuronCore's memory belongs to this process alone."""
    index = _device_index(device)
    import os
    lines = [f"neuron:{index}",
             f"process {os.getpid():>10} uses {memory_reserved(index) / (1024 * 1024):>12.3f} MB "
             "neuron memory"]
    return "\n".join(lines)


list_gpu_processes = list_processes
