"""What the readiness command sees of the script's steps while it runs: a step ends at each
`optimizer.step()` (torch.optim's global post hook), else at each `torch.profiler.profile.step()`,
else at the end of each top-level module forward. Every step's wall time and counts are kept; the ATen ops on neuron tensors of one
step (the second, the first when there is only one) are recorded at their real shapes for the
time model to price, and recording stops there so the rest of the run pays nothing for it."""

from __future__ import annotations

import sys
import time
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
# internal: see runtime/torch_internals.py "torch.utils._pytree.tree_flatten"
from torch.utils._pytree import tree_flatten

from ..device import accounting
from ..ops.op_support import host_fallback_ops
from ..timemodel.trace import OpRecord, Trace, _operands, _Recorder

MAX_STEPS_KEPT = 1000  # per-step rows in the report; a longer run keeps its first ones
KINDS = ("optimizer", "profiler", "forward")  # what ends a step, the first seen of these wins


def _on_neuron(values: Any) -> bool:
    flat, _ = tree_flatten(values)
    return any(isinstance(t, torch.Tensor) and t.device.type == "neuron" for t in flat)


class _LiveRecorder(_Recorder):
    """The time model's recorder on real tensors: only ops on neuron tensors are the step's
    work (the data pipeline's CPU ops are not), `.item()` really reads its value, and the ops
    the op-support table classes host fallbacks (as the accounting counts them) are priced as
    host stalls, not as device work."""

    def __init__(self, trace: Trace, resident: dict[int, str]):
        super().__init__(trace, resident)
        self.host_ops = frozenset(op for op, _ in host_fallback_ops())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _on_neuron((args, kwargs)):
            return func(*args, **kwargs)
        if func.overloadpacket.__name__ == "_local_scalar_dense":
            self.trace.ops.append(OpRecord(name="_local_scalar_dense",
                                           inputs=_operands(args, self.resident), outputs=[],
                                           host=True))
            return func(*args, **kwargs)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if func.name() in self.host_ops or f"aten::{func.overloadpacket.__name__}" in self.host_ops:
            self.trace.ops[-1].host = True
        return out


class StepWatcher:
    """Installs the hooks at `install()`; after `remove()`, `kind`, `steps` and `step_trace()`
    give what was seen."""

    def __init__(self, progress=sys.stderr):
        self.progress = progress
        # Step rows by how a step ends: the optimizer's are the steps when there are any.
        self._rows: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
        self._totals = {k: 0 for k in KINDS}
        self._marks: dict[str, list[int]] = {k: [] for k in KINDS}  # ops index per step end
        self._last = {k: (time.perf_counter(), (0, 0, 0)) for k in KINDS}
        self._profiler_step = None  # torch.profiler.profile.step, while it is wrapped
        self._trace = Trace()
        self._recorder: _LiveRecorder | None = None
        self._depth = 0  # nesting of module forwards: a step ends at the outermost one
        self._handles: list[Any] = []
        self.rank: int | None = None  # the process group's rank, seen at a step's end
        # The accounting's summary at the end of each kind's first step run without the
        # recorder: what later steps add to it (recompiles in the steady state) is what the
        # report ranks. Steps run under the recorder are warm-up: a Python dispatch mode
        # changes some backward ops' signatures, so the first step after it sees a few "new"
        # shapes that a run without the command would not.
        self._steady: dict[str, dict[str, Any]] = {}

    @property
    def steady_summary(self) -> dict[str, Any] | None:
        return self._steady.get(self.kind)

    @property
    def kind(self) -> str:
        """"optimizer" (a step ends at optimizer.step()), "profiler" (at a profiler's step()),
        "forward" (at a top-level forward's end) or "none" (none happened)."""
        return next((k for k in KINDS if self._totals[k]), "none")

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self._rows.get(self.kind, [])

    @property
    def total_steps(self) -> int:
        return self._totals.get(self.kind, 0)

    def step_trace(self) -> tuple[Trace, int | None]:
        """The recorded ops of one step and which step it is (the second when there were two,
        else the first); with no step, every op recorded and None."""
        marks = self._marks.get(self.kind, [])
        ops = self._trace.ops
        if len(marks) >= 2:
            return Trace(ops[marks[0]:marks[1]]), 2
        if marks:
            return Trace(ops[:marks[0]]), 1
        return Trace(list(ops)), None

    def install(self) -> None:
        self._handles = [
            register_optimizer_step_post_hook(self._optimizer_stepped),
            torch.nn.modules.module.register_module_forward_pre_hook(self._forward_begins),
            torch.nn.modules.module.register_module_forward_hook(self._forward_ends),
        ]
        # A profiler's step() marks a step in scripts without an optimizer (inference loops
        # that profile); the method is wrapped while the watcher is installed.
        # internal: see runtime/torch_internals.py "torch.profiler.profile.step"
        self._profiler_step = original = torch.profiler.profile.step
        watcher = self

        def step(profile, *args, **kwargs):
            watcher.end_step("profiler")
            return original(profile, *args, **kwargs)

        torch.profiler.profile.step = step
        self._recorder = _LiveRecorder(self._trace, {})
        self._recorder.__enter__()

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        if self._profiler_step is not None:
            torch.profiler.profile.step = self._profiler_step
            self._profiler_step = None
        self._stop_recording()

    def _stop_recording(self) -> None:
        if self._recorder is not None:
            recorder, self._recorder = self._recorder, None
            recorder.__exit__(None, None, None)

    def _optimizer_stepped(self, optimizer, args, kwargs) -> None:
        if not _on_neuron([p for g in optimizer.param_groups for p in g["params"]]):
            return  # a CPU optimizer (a reference run beside the device's) is no device step
        self._mark_resident(optimizer)
        self.end_step("optimizer")

    def _mark_resident(self, optimizer) -> None:
        """Parameters and optimizer state live in HBM between steps (the time model reads
        them from HBM whatever their size)."""
        if self._recorder is None:
            return
        for group in optimizer.param_groups:
            for p in group["params"]:
                self._recorder.resident[id(p)] = "weight"
                for value in optimizer.state.get(p, {}).values():
                    if isinstance(value, torch.Tensor):
                        self._recorder.resident[id(value)] = "weight"

    def _forward_begins(self, module, args) -> None:
        self._depth += 1

    def _forward_ends(self, module, args, output) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and _on_neuron(output):
            self.end_step("forward")

    def end_step(self, kind: str) -> None:
        now = time.perf_counter()
        if self.rank is None and torch.distributed.is_available() \
                and torch.distributed.is_initialized():
            self.rank = torch.distributed.get_rank()
        self._totals[kind] += 1
        summary = accounting.readiness_summary()
        counts = (summary["host_fallbacks"]["calls"], summary["syncs"]["count"],
                  summary["recompiles"])
        if self._recorder is None:
            self._steady.setdefault(kind, summary)
        then, before = self._last[kind]
        self._last[kind] = (now, counts)
        if len(self._rows[kind]) < MAX_STEPS_KEPT:
            self._rows[kind].append({
                "step": self._totals[kind], "seconds": now - then,
                "host_fallbacks": counts[0] - before[0], "syncs": counts[1] - before[1],
                "recompiles": counts[2] - before[2]})
        if kind == self.kind:
            ends = {"optimizer": "optimizer.step()", "profiler": "a profiler's step()",
                    "forward": "a top-level forward"}[kind]
            print(f"readiness: step {self._totals[kind]} ({now - then:.3f} s, ends at {ends})",
                  file=self.progress, flush=True)
        if self._recorder is not None:
            self._marks[kind].append(len(self._trace.ops))
            # Two optimizer steps, or many forwards and no optimizer: enough recorded.
            if len(self._marks["optimizer"]) >= 2 or len(self._marks["profiler"]) >= 2 or (
                    not self._marks["optimizer"] and len(self._marks["forward"]) >= 16):
                self._stop_recording()
