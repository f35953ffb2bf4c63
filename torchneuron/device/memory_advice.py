"""Which changes would make a step's peak fit the device, each with its estimated peak: the
step's peaks by phase (memory_breakdown.StepMemory) are rewritten category by category as the
change would rewrite them, and the largest is the new peak. The rules, and why:

- bf16 autocast: activations are matmul outputs and what follows them, half the bytes in bf16;
  autocast keeps a bf16 copy of each weight a matmul uses, which backward keeps, so the forward
  and backward phases gain half the fp32 parameters. Temporaries do not shrink: backward makes
  each gradient in bf16 and again in fp32 for the fp32 parameter. Gradients and optimizer state
  stay fp32 (autocast leaves parameters fp32).
- activation checkpointing of each block: a block keeps only its input; backward recomputes one
  block at a time, so the blocks' saved activations become their inputs plus the largest
  block's.
- FSDP2 over N cores: parameters, gradients and optimizer state are sharded N ways; a block's
  parameters are gathered whole while it runs, with the next one prefetched (two blocks), and
  its gradient is whole until reduce-scattered. Activations are per rank, unchanged.
- a smaller batch: activations, temporaries and the step's inputs scale with the batch.
- the allocator's settings: its per-process fraction is the one it has; it has no
  expandable segments (it never splits blocks: its only fragmentation is its rounding) and it
  empties its cache before raising, so neither would change a peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .memory_breakdown import Breakdown, StepMemory, fmt

_ACTIVATION_LIKE = ("activations", "temporaries")
HEADROOM = 0.95  # a change "fits" when its peak is within this share of the usable memory


@dataclass
class Suggestion:
    change: str  # what to change, in a few words
    how: str  # the code that does it
    peak: int  # the step's estimated peak after the change
    saving: int  # the estimated peak before it, less `peak`
    fits: bool
    note: str = ""

    def line(self) -> str:
        verdict = "fits" if self.fits else "does not fit"
        text = (f"  - {self.change}: saves ~{fmt(self.saving)}, peak ~{fmt(self.peak)} "
                f"({verdict}). {self.how}")
        return text + (f" {self.note}" if self.note else "")


def _peak(phases: list[Breakdown], rewrite: Callable[[Breakdown], dict[str, int]]) -> int:
    return max(sum(rewrite(p).values()) + p.fragmentation for p in phases)


def _in_passes(p: Breakdown) -> bool:
    return p.phase in ("forward", "backward", "now", "at the failed allocation")


def bf16_autocast(p: Breakdown) -> dict[str, int]:
    parts = dict(p.parts)
    if _in_passes(p):
        parts["activations"] = parts["activations"] // 2 + p.parts["parameters"] // 2
    return parts


def checkpointing(mem: StepMemory) -> Callable[[Breakdown], dict[str, int]]:
    saved = sum(b.saved for b in mem.blocks)
    kept = sum(b.input_bytes for b in mem.blocks) + max(b.saved for b in mem.blocks)

    def rewrite(p: Breakdown) -> dict[str, int]:
        parts = dict(p.parts)
        if _in_passes(p):
            parts["activations"] = min(parts["activations"],
                                       max(parts["activations"] - saved, 0) + kept)
        return parts
    return rewrite


def fsdp(mem: StepMemory, n: int) -> Callable[[Breakdown], dict[str, int]]:
    block = max((b.params for b in mem.blocks), default=0)

    def rewrite(p: Breakdown) -> dict[str, int]:
        parts = dict(p.parts)
        parts["parameters"] = parts["parameters"] // n + (2 * block if _in_passes(p) else 0)
        parts["gradients"] = parts["gradients"] // n + (block if p.phase == "backward" else 0)
        parts["optimizer_state"] //= n
        return parts
    return rewrite


def fsdp_peak(mem: StepMemory, n: int) -> int:
    """The estimated peak per rank of the step measured as `mem` with FSDP2 over `n` ranks,
    each rank running the measured step's batch."""
    return _peak(mem.phases, fsdp(mem, n))


def batch_of(scale: float) -> Callable[[Breakdown], dict[str, int]]:
    def rewrite(p: Breakdown) -> dict[str, int]:
        parts = dict(p.parts)
        for k in (*_ACTIVATION_LIKE, "other"):
            parts[k] = int(parts[k] * scale)
        return parts
    return rewrite


def advise(mem: StepMemory, capacity: int, total: int, batch_size: int | None = None,
           cores: int = 1) -> list[Suggestion]:
    """The suggestions for a step measured as `mem` on a device with `capacity` bytes usable
    (`total` without the per-process fraction) and `cores` devices to shard over."""
    phases = mem.phases
    before = _peak(phases, lambda p: p.parts)
    # Headroom: the allocator caches blocks by exact size, so a peak at the very limit can
    # still fail on a request its cache holds in blocks of other sizes.
    limited = capacity < total  # by the per-process fraction
    capacity = int(capacity * HEADROOM)
    out: list[Suggestion] = []

    def add(change: str, how: str, peak: int, note: str = "", limit: int = capacity) -> None:
        out.append(Suggestion(change, how, peak, before - peak, peak <= limit, note))

    add("bf16 autocast", "Run forward and loss under "
        "`with torch.autocast('neuron', dtype=torch.bfloat16):`.", _peak(phases, bf16_autocast))
    if mem.blocks:
        add(f"activation checkpointing of the {len(mem.blocks)} blocks "
            f"({mem.blocks[0].name}, ...)", "Call each block through "
            "`torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)`.",
            _peak(phases, checkpointing(mem)))
    else:
        out.append(Suggestion("activation checkpointing", "", before, 0, False,
                              "No repeated blocks (Sequential/ModuleList) to checkpoint: "
                              "pass the model to torch.neuron.memory.explain()."))
    if cores > 1:
        sizes = [n for n in (2, 4, 8, 16, 32, 64, 128) if n <= cores] or [cores]
        n = next((n for n in sizes if fsdp_peak(mem, n) <= capacity), sizes[-1])
        add(f"FSDP2 over {n} cores", f"`fully_shard` each block, then the model, on a "
            f"{n}-rank neuron process group (torchrun --nproc-per-node {n}).", fsdp_peak(mem, n))
    else:
        out.append(Suggestion("FSDP2", "", before, 0, False,
                              "Only one neuron core is visible (NEURON_RT_VISIBLE_CORES)."))
    if batch_size and batch_size > 1:
        fitting = [b for b in range(batch_size - 1, 0, -1)
                   if _peak(phases, batch_of(b / batch_size)) <= capacity]
        b = fitting[0] if fitting else 1
        add(f"batch {b} instead of {batch_size}", "Fewer samples per step (gradient "
            "accumulation keeps the effective batch).", _peak(phases, batch_of(b / batch_size)))
    else:
        add("half the batch", "Pass batch_size to torch.neuron.memory.explain() for the largest "
            "that fits.", _peak(phases, batch_of(0.5)))
    if limited:
        add("the whole device", "`torch.neuron.set_per_process_memory_fraction(1.0)` (it is "
            f"limited to a fraction of {fmt(total)}).", before, limit=int(total * HEADROOM))
    else:
        out.append(Suggestion("allocator settings", "", before, 0, False,
                              "None would help: the allocator has no expandable_segments (it "
                              "never splits a block; its only fragmentation is its rounding "
                              "to 512 bytes) and it empties its cache before raising."))
    return out
