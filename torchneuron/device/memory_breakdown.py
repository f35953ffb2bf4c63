"""What device memory holds, by what it is for: parameters, gradients, optimizer state,
activations, temporaries and other tensors (PyTorch's MemTracker categories), plus what the
allocator adds on top (its cache and its rounding). Two sources:

- `measure_step(step, model, optimizer)` runs a step under PyTorch's
  `torch.distributed._tools.mem_tracker.MemTracker`, which tells activations (made in forward)
  from temporaries (made in backward) and records each module's peaks. It works on real neuron
  tensors and on a full-size step built under FakeTensorMode (no memory used), so a model that
  does not fit can still be measured.
- `live_breakdown(device)` classifies the tensors alive now (parameters, their .grad, optimizer
  state, the rest) without running anything: what the out-of-memory message uses, since the
  device has no room left to run anything.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Callable

import torch

from .._C import device as _device_c
from ._index import _device_index, _device_t

CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other")
# MemTracker's reference types -> our categories (buffers and the step's inputs are "other").
_TRACKER = {"PARAM": "parameters", "GRAD": "gradients", "OPT": "optimizer_state",
            "ACT": "activations", "TEMP": "temporaries", "BUFFER": "other", "OTH": "other",
            "INP": "other"}
BLOCK_BYTES = 512  # the allocator rounds each allocation up to this (NeuronAllocator.h)


def _empty() -> dict[str, int]:
    return dict.fromkeys(CATEGORIES, 0)


@dataclass
class Breakdown:
    """Bytes by category at one moment (`phase`: "forward", "backward", "step" or "now")."""
    parts: dict[str, int] = field(default_factory=_empty)
    phase: str = "peak"
    cache: int = 0  # reserved by the allocator, not allocated
    fragmentation: int = 0  # allocated beyond what was requested (rounding to BLOCK_BYTES)

    @property
    def tensors(self) -> int:
        return sum(self.parts.values())

    @property
    def needed(self) -> int:
        """What the step needs: its tensors and their rounding (the allocator empties its cache
        before it gives up, so the cache never makes a step fail)."""
        return self.tensors + self.fragmentation

    @property
    def total(self) -> int:
        return self.tensors + self.cache + self.fragmentation

    def lines(self) -> list[str]:
        rows = [(name.replace("_", " "), self.parts[name]) for name in CATEGORIES]
        rows += [("cache (reserved, unallocated)", self.cache),
                 ("fragmentation (rounding)", self.fragmentation)]
        return [f"  {name:<30}{fmt(n):>12}" for name, n in rows if n] + \
            [f"  {'total':<30}{fmt(self.total):>12}"]


@dataclass
class Block:
    """One repeated block of the model (a child of its largest Sequential/ModuleList)."""
    name: str
    params: int  # bytes of its parameters
    input_bytes: int  # bytes of the tensors it is called with (kept by checkpointing)
    saved: int  # activations it leaves alive after its forward (its output included)


@dataclass
class StepMemory:
    """A measured (or fake-traced) step: its peaks by phase and its blocks."""
    phases: list[Breakdown]
    blocks: list[Block]
    device: int

    @property
    def peak(self) -> Breakdown:
        return max(self.phases, key=lambda b: b.needed)


def fmt(n: float, width: int = 0) -> str:
    """`n` bytes in B, KiB, MiB or GiB, two decimals but for B. With a `width`, the number is
    padded to it and the unit to three letters, so that a column lines up (memory_summary)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            number = f"{n:{width}.{0 if unit == 'B' else 2}f}"
            return f"{number} {unit:<3}" if width else f"{number} {unit}"
        n /= 1024
    raise AssertionError("unreachable: GiB takes any size")


def find_blocks(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The model's repeated blocks: the children of its Sequential or ModuleList with the most
    parameters (a transformer's layers, an MLP's stages); none if it has no such container."""
    best, best_params = None, 0
    for name, mod in model.named_modules():
        if isinstance(mod, (torch.nn.Sequential, torch.nn.ModuleList)) and len(mod) > 1:
            n = sum(p.numel() for p in mod.parameters())
            if n > best_params:
                best, best_params = (name, mod), n
    if best is None:
        return []
    prefix = best[0] + "." if best[0] else ""
    return [(prefix + n, m) for n, m in best[1].named_children()]


def _on_device(snap: dict, index: int) -> dict[str, int]:
    """A MemTracker snapshot's entry for neuron:index (fake tensors may say just "neuron")."""
    for dev, counts in snap.items():
        if dev.type == "neuron" and (dev.index or 0) == index:
            return {getattr(k, "name", k): n for k, n in counts.items()}
    return {}


def _is_fake(t: torch.Tensor) -> bool:
    # internal: see runtime/torch_internals.py "torch._subclasses.FakeTensor"
    return isinstance(t, torch._subclasses.FakeTensor)


def _inputs_alive(model: torch.nn.Module, optimizer, index: int) -> int:
    """Bytes of the neuron tensors alive before the step that are neither the model's nor the
    optimizer's (its input batch, mostly): MemTracker sees only what the step makes."""
    fake = _is_fake(next(model.parameters()))
    owned = {id(p) for p in model.parameters()} | {id(b) for b in model.buffers()}
    if optimizer is not None:
        owned |= {id(v) for st in optimizer.state.values() for v in st.values()}
    seen, total = set(), 0
    gc.collect()
    for t in gc.get_objects():
        if not issubclass(type(t), torch.Tensor) or id(t) in owned or _is_fake(t) != fake:
            continue
        if t.device.type != "neuron" or (t.device.index or 0) != index:
            continue
        # internal: see runtime/torch_internals.py "torch.Tensor._base"
        base = t if t._base is None else t._base
        if id(base) not in seen and id(base) not in owned:
            seen.add(id(base))
            total += _nbytes(base)
    return total


def _nbytes(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes()


def measure_step(step: Callable[[], object], model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer | None = None, iterations: int = 2,
                 device: _device_t = None) -> StepMemory:
    """Runs `step` `iterations` times under MemTracker (the second run is the steady state:
    the optimizer's state exists during its forward) and returns the peaks of the last run's
    forward and backward and of the whole run, by category, with the model's blocks."""
    # internal: see runtime/torch_internals.py "torch.distributed._tools.mem_tracker.MemTracker"
    from torch.distributed._tools.mem_tracker import MemTracker
    # internal: see runtime/torch_internals.py "torch.distributed._tools.mem_tracker._ModState"
    from torch.distributed._tools.mem_tracker import _ModState

    if not callable(step):
        raise TypeError(f"step must be a callable that runs one training step, got {step!r}")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be a positive int, got {iterations!r}")
    index = _device_index(device)
    blocks = find_blocks(model)
    inputs: dict[str, int] = {}

    def record_input(name):
        def hook(_mod, args):
            inputs[name] = sum(_nbytes(a) for a in args if isinstance(a, torch.Tensor))
        return hook

    before = _inputs_alive(model, optimizer, index)
    handles = [m.register_forward_pre_hook(record_input(n)) for n, m in blocks]
    tracker = MemTracker()
    tracker.track_external(*([model] + ([optimizer] if optimizer is not None else [])))
    try:
        with tracker:
            for i in range(iterations):
                if i:
                    tracker.reset_mod_stats()
                step()
    finally:
        for h in handles:
            h.remove()

    def breakdown(snap: dict, phase: str) -> Breakdown:
        parts = _empty()
        for key, n in _on_device(snap, index).items():
            if getattr(key, "name", key) in _TRACKER:  # MemTracker's _MemRefType members
                parts[_TRACKER[getattr(key, "name", key)]] += n
        parts["other"] += before
        return Breakdown(parts, phase)

    phases = []
    root = tracker.memory_tracking.get(model)
    for state, phase in ((_ModState.PEAK_FW, "forward"), (_ModState.PEAK_BW, "backward")):
        snaps = root.snapshots.get(state, []) if root is not None else []
        if snaps:
            phases.append(breakdown(snaps[-1], phase))
    # The step's own peak counts where it is outside forward and backward (the optimizer's).
    overall = breakdown(tracker.get_tracker_snapshot("peak"), "optimizer step")
    if overall.needed > max((p.needed for p in phases), default=0):
        phases.append(overall)

    found = []
    for name, mod in blocks:
        stats = tracker.memory_tracking.get(mod)
        pre = stats.snapshots.get(_ModState.PRE_FW, []) if stats else []
        post = stats.snapshots.get(_ModState.POST_FW, []) if stats else []
        saved = (_on_device(post[-1], index).get("ACT", 0) - _on_device(pre[-1], index).get("ACT", 0)
                 if pre and post else 0)
        found.append(Block(name, sum(_nbytes(p) for p in mod.parameters()),
                           inputs.get(name, 0), max(saved, 0)))
    return StepMemory(phases, found, index)


def _optimizer_tensors() -> set[int]:
    found: set[int] = set()
    for obj in gc.get_objects():
        # type(), not isinstance(): some objects (deprecated torch names) warn on __class__.
        if issubclass(type(obj), torch.optim.Optimizer):
            for state in obj.state.values():
                for v in state.values():
                    if isinstance(v, torch.Tensor) and v.device.type == "neuron" \
                            and not _is_fake(v):
                        found.add(v.untyped_storage().data_ptr())
    return found


def live_breakdown(device: _device_t = None) -> Breakdown:
    """The neuron tensors alive now, by category: parameters, their gradients, optimizer state
    (any torch.optim.Optimizer's), and the rest as activations (autograd keeps them, or the
    program does); cache and rounding from the allocator's blocks. Allocates nothing."""
    index = _device_index(device)
    parts = _empty()
    seen: set[int] = set()
    optim = _optimizer_tensors()

    def add(t: torch.Tensor, category: str) -> None:
        if t.device.type != "neuron" or t.device.index != index or _is_fake(t):
            return
        storage = t.untyped_storage()
        if storage.data_ptr() in seen or storage.nbytes() == 0:
            return
        seen.add(storage.data_ptr())
        parts[category] += storage.nbytes()

    tensors = [o for o in gc.get_objects() if issubclass(type(o), torch.Tensor)
               and o.device.type == "neuron" and not _is_fake(o)]
    for t in tensors:
        if isinstance(t, torch.nn.Parameter):
            add(t, "parameters")
            if t.grad is not None:
                add(t.grad, "gradients")
    for t in tensors:
        if t.untyped_storage().data_ptr() in optim:
            add(t, "optimizer_state")
    blocks = [b for b in _device_c.memory_snapshot() if b["device"] == index]
    live = [b for b in blocks if b["allocated"]]
    # What the allocator holds that no Python object reaches: tensors autograd saved for
    # backward, and temporaries of the op in flight.
    parts["activations"] = max(sum(b["requested_size"] for b in live) - sum(parts.values()), 0)
    return Breakdown(parts, "now",
                     cache=sum(b["size"] for b in blocks if not b["allocated"]),
                     fragmentation=sum(b["size"] - b["requested_size"] for b in live))
