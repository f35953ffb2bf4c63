"""torch.neuron.memory.explain(): what the memory of a step (or of now) is, and which changes
would make it fit the device, each with its estimated peak. The same text ends the message of a
torch.OutOfMemoryError on neuron (`oom_advice`, registered as the allocator's out-of-memory
hook)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .._C import device as _device_c
from .._C import runtime as _runtime_c
from ._index import _device_index, _device_t
from ._oom_message import add_tail
from .memory_advice import Suggestion, advise
from .memory_breakdown import Breakdown, StepMemory, find_blocks, fmt, live_breakdown, measure_step


@dataclass
class Explanation:
    peak: Breakdown  # the largest phase, by category
    capacity: int  # what the allocator may use (HBM times the per-process fraction)
    suggestions: list[Suggestion]
    memory: StepMemory

    @property
    def fits(self) -> bool:
        return self.peak.needed <= self.capacity

    def __str__(self) -> str:
        head = (f"Peak {fmt(self.peak.needed)} ({self.peak.phase}) of {fmt(self.capacity)} "
                f"usable: {'fits' if self.fits else 'does not fit'}.")
        lines = [head, *self.peak.lines()]
        if not self.fits:
            lines.append("Changes that would make it fit, each alone (estimated):")
            lines += [s.line() for s in sorted(self.suggestions, key=lambda s: -s.saving)]
        return "\n".join(lines)


def _capacity(index: int) -> tuple[int, int]:
    total = _device_c.mem_get_info(index)[1]
    return int(total * _device_c.get_memory_fraction(index)), total


def explain(step: Callable[[], object] | None = None, model: torch.nn.Module | None = None,
            optimizer: torch.optim.Optimizer | None = None, *, batch_size: int | None = None,
            device: _device_t = None) -> Explanation:
    """The peak of `step` (a callable running one training step of `model` with `optimizer`),
    by category, and the changes that would make it fit; `str()` of the result reads it out.
    Build the model and run this under FakeTensorMode to explain a model too large to run.
    Without a step, the memory in use now."""
    index = _device_index(device)
    capacity, total = _capacity(index)
    cores = _runtime_c.device_count()
    if step is None:
        if model is not None or optimizer is not None:
            raise ValueError("explain(): model and optimizer describe a step: pass step too")
        mem = StepMemory([live_breakdown(index)], [], index)
    else:
        if model is None:
            raise ValueError("explain(step): pass the model the step trains (its parameters "
                             "and blocks are what the advice is about)")
        # internal: see runtime/torch_internals.py "torch._subclasses.FakeTensor"
        fake = isinstance(next(model.parameters(), None), torch._subclasses.FakeTensor)
        if not fake:
            torch.accelerator.reset_peak_memory_stats(index)
        mem = measure_step(step, model, optimizer, device=index)
        if not fake:  # what the allocator added: its cache and its rounding at the peak
            stats = torch.accelerator.memory_stats(index)
            peak = mem.peak
            peak.fragmentation = max(stats["allocated_bytes.all.peak"] - peak.tensors, 0)
            peak.cache = max(stats["reserved_bytes.all.peak"] - stats["allocated_bytes.all.peak"], 0)
    return Explanation(mem.peak, capacity, advise(mem, capacity, total, batch_size, cores), mem)


def oom_advice(device: int, size: int, usable: int) -> str:
    """The tail of an out-of-memory message for a request of `size` bytes that failed with
    `usable` bytes allowed on the device: the memory in use by category, and the changes that
    would free room, each with whether the failed allocation would then fit. The allocator
    calls it after releasing its lock, so it may read the allocator's blocks."""
    now = live_breakdown(device)
    now.phase = "at the failed allocation"
    total = _device_c.mem_get_info(device)[1]
    text = ["\nIn use when it failed, by what it is for (torch.neuron.memory.explain()):",
            *now.lines()]
    # The request that failed is counted as a temporary: what it would have held is unknown,
    # and a temporary is what no change but a smaller batch shrinks (the cautious verdict).
    now.parts["temporaries"] += size
    mem = StepMemory([now], [], device)
    verdict = "fits" if now.needed <= usable else "does not fit"
    text += [f"With the failed request of {fmt(size)} (counted as a temporary): "
             f"{fmt(now.needed)} of {fmt(usable)} usable: {verdict}.",
             "Changes that would free room, each alone, and whether the failed allocation "
             "would then fit (estimated on what is in use; the step's full peak is higher; "
             "torch.neuron.memory.explain(step, model, optimizer) under FakeTensorMode "
             "measures it):"]
    text += [s.line() for s in sorted(advise(mem, usable, total, None, _runtime_c.device_count()),
                                      key=lambda s: -s.saving)]
    return "\n".join(text)


def install_oom_advice() -> None:
    """Every neuron out-of-memory message ends with oom_advice's text."""
    add_tail(oom_advice)
