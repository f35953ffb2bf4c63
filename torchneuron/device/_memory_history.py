"""Memory snapshots in the shape of torch.cuda.memory's (_record_memory_history, _snapshot,
_dump_snapshot), so that PyTorch's torch/cuda/_memory_viz.py draws them: "segments" from the
caching allocator's blocks, "device_traces" from the allocator's history (csrc/profiler/
MemoryHistory.h), which records while _record_memory_history is on. The allocator does not split
blocks, so each segment holds one block. With a `context` (the default), every allocation and
free carries the Python stack that made it ("frames": filename, line, name, innermost first,
gathered by PyTorch's CapturedTraceback as CUDA's are); C++ frames are not recorded, so
stacks="all" gives the Python frames too. Blocks in the segments carry their allocation's
frames."""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

from .._C import device as _device_c
from .._C import profiler as _profiler_c
from .._C import runtime as _runtime_c
from ._index import _device_t
from ._oom_message import add_tail

_SMALL_SEGMENT = 1 << 20  # CUDA's small pool holds blocks up to 1 MiB
_DEFAULT_MAX_ENTRIES = 100_000  # when NEURON_OOM_SNAPSHOT turns recording on


def _record_memory_history(enabled: str | None = "all", context: str | None = "all",
                           stacks: str = "all", max_entries: int = sys.maxsize,
                           device: _device_t = None, clear_history: bool = False,
                           compile_context: bool = False, global_record_annotations: bool = False,
                           skip_actions: list[str] | None = None) -> None:
    """Starts (enabled="all" or "state") or stops (enabled=None) recording the allocator's
    history, keeping the last `max_entries` events; arguments as torch.cuda.memory's."""
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', got {stacks!r}")
    if not isinstance(max_entries, int) or max_entries < 0:
        raise ValueError(f"max_entries must be a non-negative int, got {max_entries!r}")
    if clear_history:
        _profiler_c.set_memory_history(False, 0)
    _profiler_c.set_memory_history(enabled is not None, min(max_entries, sys.maxsize),
                           stacks=context is not None)


def _trace_entries(history, device_count: int) -> list[list[dict[str, Any]]]:
    traces: list[list[dict[str, Any]]] = [[] for _ in range(device_count)]
    for action, device, address, size, _requested, time_us, frames in history:
        while device >= len(traces):
            traces.append([])
        entry = {"addr": address, "size": size, "stream": 0, "time_us": time_us,
                 "frames": frames}
        if action == "free":  # the device is synchronous: the free completes when requested
            traces[device].append({**entry, "action": "free_requested"})
            traces[device].append({**entry, "action": "free_completed"})
        elif action == "oom":
            traces[device].append({**entry, "action": "oom", "device_free": 0})
        else:
            traces[device].append({**entry, "action": action})
    return traces


def _segment(device: int, address: int, size: int, requested: int, allocated: bool,
             frames: list | None = None) -> dict:
    return {"device": device, "address": address, "total_size": size,
            "allocated_size": size if allocated else 0, "active_size": size if allocated else 0,
            "requested_size": requested if allocated else 0, "stream": 0,
            "segment_type": "small" if size <= _SMALL_SEGMENT else "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
            "blocks": [{"address": address, "size": size,
                        "requested_size": requested if allocated else 0,
                        "state": "active_allocated" if allocated else "inactive",
                        "frames": (frames or []) if allocated else []}]}


def _allocator_settings() -> dict:
    return {"PYTORCH_NEURON_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": False, "pinned_num_register_threads": 1,
            "release_lock_on_malloc": False, "pinned_use_host_register": False,
            "roundup_power2_divisions": {}}


def _snapshot(device: _device_t = None) -> dict[str, Any]:
    """The allocator's state (segments) and recorded history (device_traces), as
    torch.cuda.memory._snapshot() returns them."""
    history = _profiler_c.memory_history()
    # A live block's frames: those of the last allocation at its address.
    allocated_at = {address: frames for action, _, address, _, _, _, frames in history
                    if action == "alloc"}
    segments = [_segment(b["device"], b["address"], b["size"], b["requested_size"],
                         b["allocated"], allocated_at.get(b["address"]))
                for b in _device_c.memory_snapshot()]
    devices = max([_runtime_c.device_count(), *(s["device"] + 1 for s in segments)])
    return {"segments": segments,
            "device_traces": _trace_entries(history, devices),
            "allocator_settings": _allocator_settings()}


def _snapshot_from_history() -> dict[str, Any]:
    """The snapshot rebuilt from the history alone (live segments and blocks replayed), for the
    out-of-memory hook, which runs while the allocator is locked and must not ask it."""
    history = _profiler_c.memory_history()
    segments: dict[int, list] = {}
    for action, device, address, size, requested, _, frames in history:
        if action == "segment_alloc":
            segments[address] = [device, address, size, 0, False, []]
        elif action == "segment_free":
            segments.pop(address, None)
        elif action in ("alloc", "free"):
            seg = segments.setdefault(address, [device, address, size, 0, False, []])
            seg[3], seg[4], seg[5] = requested, action == "alloc", frames
    devices = max([1, *(d + 1 for d, *_ in segments.values())])
    return {"segments": [_segment(*s) for s in segments.values()],
            "device_traces": _trace_entries(history, devices),
            "allocator_settings": _allocator_settings()}


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Writes _snapshot() to `filename` with pickle (open it at pytorch.org/memory_viz)."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def _oom_snapshot_writer(path: str):
    def write(device: int, size: int, usable: int) -> str:
        target = path.replace("%p", str(os.getpid()))
        with open(target, "wb") as f:
            pickle.dump(_snapshot_from_history(), f)
        return f" A memory snapshot was written to {target} (NEURON_OOM_SNAPSHOT)."
    return write


def apply_oom_snapshot_setting(config) -> None:
    """Registered to run when the configuration is read: with NEURON_OOM_SNAPSHOT set, records
    the allocator's history from then on and writes it where the variable says on an
    out-of-memory error, whose message names the file."""
    if config.oom_snapshot:
        _profiler_c.set_memory_history(True, _DEFAULT_MAX_ENTRIES, stacks=True)
        add_tail(_oom_snapshot_writer(config.oom_snapshot))
