"""vLLM's shutdown (`cleanup_dist_env_and_memory`) calls `torch.accelerator.empty_host_cache()`
on every platform but the CPU. torchneuron provides pinned memory through its PrivateUse1 hooks
and registers no `at::HostAllocator`, and PyTorch 2.13's empty_host_cache() crashes the process
(SIGSEGV) on such a device once it is in use. This platform pins nothing
(`is_pin_memory_available()` is False), so there is no host cache to empty: in vLLM's processes
the call empties nothing on neuron and keeps its meaning for any other accelerator.
"""

from __future__ import annotations

import torch

# internal: see runtime/torch_internals.py "torch.accelerator.empty_host_cache"
_original = torch.accelerator.empty_host_cache


def _empty_host_cache() -> None:
    accelerator = torch.accelerator.current_accelerator()
    if accelerator is not None and accelerator.type == "neuron":
        return
    _original()


def install() -> None:
    # internal: see runtime/torch_internals.py "torch.accelerator.empty_host_cache"
    torch.accelerator.empty_host_cache = _empty_host_cache
