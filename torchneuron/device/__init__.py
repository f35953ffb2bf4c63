"""`torch.neuron`: the device module, shaped like `torch.cuda` and split like it. This file owns
device selection and initialization; memory, streams, random and properties live in their own
submodules, whose names it re-exports. Registered with `torch._register_device_module`.

- `_index.py`: how a `device` argument names a neuron device; every submodule resolves it here.
- `memory.py`: device memory as the caching allocator sees it (statistics, cache, fraction).
- `memory_breakdown.py`: what memory holds by purpose (PyTorch's MemTracker categories) plus the
  allocator's cache and rounding, measured on a step or from a fake-tensor trace.
- `memory_advice.py`: which changes (bf16 autocast, checkpointing, FSDP2, batch, allocator
  settings) would make a step fit, each with its estimated peak.
- `memory_explain.py`: `torch.neuron.memory.explain()`, and the advice that ends an OOM message.
- `_oom_message.py`: the out-of-memory message's tails (snapshot writer, advisor), in order.
- `_memory_history.py`: memory snapshots in the shape of torch.cuda.memory's, for _memory_viz.
- `streams.py`: streams and events, the current/default stream and the `stream` context manager.
- `graphs.py`: device graphs, as `torch.cuda.graphs`: `NeuronGraph`, `graph`,
  `make_graphed_callables`.
- `random.py`: each device's default generator, its state and seeding; NEURON_RNG=cpu.
- `properties.py`: what a device is (name, HBM, LogicalNC configuration, peak figures).
- `amp.py`: `torch.neuron.amp`, the deprecated device-specific spellings of `torch.amp`.
- `comm.py`: copies between devices for `nn.DataParallel`, shaped like `torch.cuda.comm`.
- `ipc.py`: neuron tensors between processes, shared in device memory as CUDA's IPC shares them.
- `legacy_types.py`: the legacy typed names (`torch.neuron.FloatTensor`, typed storages).
- `monitoring.py`: torch.cuda's hardware monitors, refused with what to use instead.
- `nvtx.py`: `torch.neuron.nvtx`, ranges and marks recorded on the device's timeline.
- `accounting.py`: the readiness accounting: host fallbacks, host syncs, shape signatures,
  recompiles and peak memory counted while the program runs; `readiness_summary()`.
- `contract.py`: `torch.neuron.expect(...)`, the contract on a block's counts, and NEURON_EXPECT.
- `contract_pytest.py`: the pytest plugin: `@pytest.mark.neuron_expect(...)`, NEURON_EXPECT per
  test."""

from __future__ import annotations

import sys

import torch

from .._C import device as _device_c
from .._C import runtime as _runtime_c
from ..runtime import device_state
from . import accounting, amp, comm, contract, ipc, legacy_types, memory, monitoring, nvtx
from . import graphs, properties, random, streams
from .accounting import readiness_summary, reset_readiness
from .contract import ExpectationError, expect
from .graphs import *  # noqa: F403
from ._index import _device_index, _device_t
from .ipc import ipc_collect
from .memory import *  # noqa: F403
from .monitoring import *  # noqa: F403
from .properties import *  # noqa: F403
from .properties import _NeuronDeviceProperties  # noqa: F401  (old pickles name it here)
from .random import *  # noqa: F403
from .streams import *  # noqa: F403

# The submodules themselves stay out of __all__: a star import would otherwise bind `random`
# over the standard library's.
__all__ = ["is_available", "is_initialized", "init", "device_count", "current_device",
           "set_device", "synchronize", "eager_mode", "device", "device_of", "ipc_collect",
           "expect", "ExpectationError", "readiness_summary", "reset_readiness",
           *graphs.__all__, *memory.__all__, *monitoring.__all__, *properties.__all__, *random.__all__,
           *streams.__all__, *legacy_types.TENSOR_TYPES, *legacy_types.STORAGE_TYPES]

# torch.neuron.FloatTensor, torch.neuron.FloatStorage, ... as torch.cuda has them.
globals().update(legacy_types.build())


def _alias_submodules(package_name: str) -> None:
    """Make `import torch.neuron.memory` (like `import torch.cuda.memory`) find these modules;
    without the alias, Python would load a second copy of the file under the new name."""
    for submodule in (amp, comm, memory, monitoring, nvtx, properties, random, streams):
        sys.modules[f"{package_name}.{submodule.__name__.rsplit('.', 1)[1]}"] = submodule


def is_available() -> bool:
    """Whether a neuron device exists; reads the configuration, does not initialize."""
    return device_count() > 0


def is_initialized() -> bool:
    """Whether device state exists in this process (created at the first device use or
    init(), as torch.cuda's), not merely whether the configuration was read."""
    return _device_c.is_initialized() and not _device_c.is_in_bad_fork()


def init() -> None:
    """Creates device state now (otherwise the first device use does); raises ConfigError for a
    bad configuration and RuntimeError in a process forked from an initialized parent."""
    device_state.configure()
    _device_c.init()


def __getattr__(name: str):
    # torch.utils.checkpoint reads `_initialized` (torch.cuda's flag) to decide whether to save
    # and restore the device's RNG state around a recomputation: it must follow the device's
    # state, so it is computed, not a module constant.
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module 'torch.neuron' has no attribute {name!r}")


def _is_in_bad_fork() -> bool:
    """True in a child forked after the parent initialized neuron (torch.manual_seed and the
    torch.multiprocessing checks read it, as torch.cuda's)."""
    return _device_c.is_in_bad_fork()


def device_count() -> int:
    device_state.configure()
    return _runtime_c.device_count()


def current_device() -> int:
    device_state.configure()
    return _device_c.get_device()


def set_device(device: _device_t) -> None:
    index = _device_index(device)
    # Initializes, as torch.cuda.set_device does: what asks is_initialized() next must see the
    # device chosen. FakeTensor gives a tensor on "neuron" the current device only once the
    # device is initialized (neuron:0 before), and caches what it made: DTensor's sharding
    # propagation on rank 1 of an FSDP2 model then mixed neuron:1 and neuron:0 (TorchTitan's
    # init_weights, trunc_normal_ on a sharded parameter).
    init()
    _device_c.set_device(index)


def synchronize(device: _device_t = None) -> None:
    _device_c.synchronize(_device_index(device))


def eager_mode() -> str:
    """How ops on neuron execute now: "sync" (each op completes before its call returns),
    "async" (queued on the current stream; errors surface at the next synchronization) or
    "fused" (async, with hot chains of pointwise ops run as one generated kernel). The configured
    NEURON_EAGER_MODE with the run-time settings applied: NEURON_LAUNCH_BLOCKING=1 makes it
    "sync", torch.use_deterministic_algorithms(True) makes fused mode "async"."""
    from ..runtime import execution

    return execution.eager_mode()


def _sleep(cycles: int) -> None:
    """Queues work that keeps the current device busy for about `cycles` nanoseconds (as
    torch.cuda._sleep spins the GPU for that many clock cycles): tests use it to have work
    still running when they look."""
    current_device()  # device state first (lazy init)
    _device_c.sleep(int(cycles))


class device:
    """Context manager that changes the current neuron device (like `torch.cuda.device`)."""

    def __init__(self, device: _device_t):
        self.idx = -1 if device is None else _device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            _device_c.set_device(self.idx)
        return self

    def __exit__(self, *exc) -> bool:
        if self.idx >= 0 and self.idx != self.prev_idx:
            _device_c.set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the tensor's neuron device current; no-op for CPU tensors."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else None)
