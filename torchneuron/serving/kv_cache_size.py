"""How many bytes of neuron memory the vLLM KV cache gets. The rule is vLLM CPU's: an explicit
size (`--kv-cache-memory-bytes`, or `VLLM_CPU_KVCACHE_SPACE` in GiB, which vLLM's CPU platform
code turns into the same setting), else a modest default. What differs is the ceiling: the cache
lives in device memory, which on the software NeuronCore is host memory, so it may never ask for
more than both the device's free memory and the host memory that can back it.

Kept free of vLLM so that the rule is tested in the main environment too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._C import runtime as _runtime_c

GiB = 1 << 30

# vLLM CPU's historical default for VLLM_CPU_KVCACHE_SPACE was 4 GiB; this device shares its
# host with everything else, so the default is smaller, and the ceiling below still applies.
DEFAULT_KV_CACHE_BYTES = 1 * GiB

# The share of the backing host memory a default-sized cache may take: the weights, the
# activations and the rest of the machine keep the remainder.
DEFAULT_SHARE_OF_BACKING = 0.25


@dataclass(frozen=True)
class DeviceMemory:
    """What the device can still hold, and where the figure for its backing memory came from."""
    device_free: int
    backing_available: int
    backing_source: str


def device_memory(device: torch.device) -> DeviceMemory:
    """Free device memory and the host memory that backs it (MemAvailable and the cgroup
    limit, as the runtime seam reports them)."""
    free, _total = torch.neuron.mem_get_info(device)
    return DeviceMemory(free, int(_runtime_c.backing_memory_available()),
                        "torchneuron._C.runtime.backing_memory_available")


def kv_cache_bytes(explicit: int | None, memory: DeviceMemory) -> int:
    """The KV cache size for one worker. An explicit size that the device or its backing
    memory cannot hold is refused (vLLM CPU refuses the same way); the default shrinks to fit."""
    ceiling = min(memory.device_free, memory.backing_available)
    if explicit is not None:
        if explicit <= 0:
            raise ValueError(f"The KV cache size must be positive, got {explicit} bytes.")
        if explicit > ceiling:
            raise ValueError(
                f"The KV cache asks for {explicit / GiB:.2f} GiB of neuron memory, but the device "
                f"can hold {ceiling / GiB:.2f} GiB (device free: {memory.device_free / GiB:.2f} "
                f"GiB; host memory backing it: {memory.backing_available / GiB:.2f} GiB, from "
                f"{memory.backing_source}). Decrease --kv-cache-memory-bytes or "
                "VLLM_CPU_KVCACHE_SPACE.")
        return explicit
    size = min(DEFAULT_KV_CACHE_BYTES, int(ceiling * DEFAULT_SHARE_OF_BACKING))
    if size <= 0:
        raise ValueError(f"No neuron memory is left for a KV cache (device can hold "
                         f"{ceiling} bytes).")
    return size
