"""A step's estimated Trainium time from the last profiler session's device activities: the
one-screen summary (estimated step time, top ops, compute- vs memory-bound, MFU, the profile
assumed) and the key_averages table with an estimated-time column."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from .._C import profiler as _profiler_c
from ..runtime import config
from ..runtime.profiles import ChipProfile
from .roofline import Estimate, _torch_dtype, estimate_records, hbm_bandwidth, peak_flops


@dataclass
class OpTotals:
    name: str
    calls: int = 0
    estimated_s: float = 0.0
    measured_s: float = 0.0
    flops: int = 0
    bytes: int = 0
    compute_bound_calls: int = 0

    @property
    def bound(self) -> str:
        return "compute" if self.compute_bound_calls * 2 > self.calls else "memory"


@dataclass
class StepEstimate:
    profile: ChipProfile
    lnc: int
    kernels: list[tuple[dict, Estimate]] = field(default_factory=list)

    @property
    def estimated_s(self) -> float:
        return sum(e.seconds for _, e in self.kernels)

    @property
    def measured_s(self) -> float:
        return sum(r["end_ns"] - r["start_ns"] for r, _ in self.kernels) / 1e9

    @property
    def flops(self) -> int:
        return sum(e.flops for _, e in self.kernels)

    def by_op(self) -> list[OpTotals]:
        ops: dict[str, OpTotals] = {}
        for r, e in self.kernels:
            t = ops.setdefault(r["name"], OpTotals(r["name"]))
            t.calls += 1
            t.estimated_s += e.seconds
            t.measured_s += (r["end_ns"] - r["start_ns"]) / 1e9
            t.flops += e.flops
            t.bytes += e.bytes
            t.compute_bound_calls += e.bound == "compute"
        return sorted(ops.values(), key=lambda t: t.estimated_s, reverse=True)

    def seconds_by_bound(self) -> dict[str, float]:
        out = collections.Counter()
        for _, e in self.kernels:
            out[e.bound] += e.seconds
        return dict(out)

    def mfu(self) -> float:
        """Model FLOPs utilization on the estimated timeline: the step's FLOPs over what the
        core's peak for the dtype carrying most FLOPs would do in the estimated step time."""
        if not self.kernels or self.estimated_s == 0:
            return 0.0
        flops_by_dtype = collections.Counter()
        for _, e in self.kernels:
            flops_by_dtype[e.dtype] += e.flops
        dtype = flops_by_dtype.most_common(1)[0][0]
        return self.flops / (self.estimated_s * peak_flops(self.profile, self.lnc,
                                                           _torch_dtype(dtype)))


def estimate_step(records: list[dict] | None = None, profile: ChipProfile | None = None,
                  lnc: int | None = None) -> StepEstimate:
    """Estimates for `records` (default: the last profiler session's device activities)."""
    cfg = config.current()
    profile = profile or cfg.profile
    lnc = lnc or cfg.logical_nc_config
    if records is None:
        records = _profiler_c.records()
    return StepEstimate(profile, lnc, estimate_records(records, profile, lnc))


def _time(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.3f} us"


def summary(step: StepEstimate | None = None, top: int = 10) -> str:
    """One screen: what the last profiled step would take on the profile's NeuronCore."""
    step = step or estimate_step()
    p, lnc = step.profile, step.lnc
    est = step.estimated_s
    bounds = step.seconds_by_bound()
    lines = [
        f"Estimated Trainium time on {p.name} (one logical NeuronCore, LNC={lnc}: "
        f"{peak_flops(p, lnc, None) / 1e12:.1f} TFLOP/s fp32, "
        f"{peak_flops(p, lnc, _torch_dtype('BFloat16')) / 1e12:.1f} TFLOP/s bf16, "
        f"{hbm_bandwidth(p, lnc) / 1e12:.3f} TB/s HBM, {p.kernel_launch_s * 1e6:.1f} us per kernel)",
        "A roofline estimate, not a measurement (docs/profiler.md).",
        f"step: {len(step.kernels)} kernels, estimated {_time(est)} "
        f"(measured on the software NeuronCore: {_time(step.measured_s)})",
        f"compute-bound: {_time(bounds.get('compute', 0.0))}, "
        f"memory-bound: {_time(bounds.get('memory', 0.0))}; "
        f"{step.flops / 1e9:.3f} GFLOP, MFU {100 * step.mfu():.1f}%",
        f"top ops by estimated time:",
        f"  {'op':<32} {'calls':>6} {'estimated':>12} {'share':>6} {'GFLOP':>9} {'MB':>9}  bound",
    ]
    for t in step.by_op()[:top]:
        share = 100 * t.estimated_s / est if est else 0.0
        lines.append(f"  {t.name[:32]:<32} {t.calls:>6} {_time(t.estimated_s):>12} "
                     f"{share:>5.1f}% {t.flops / 1e9:>9.3f} {t.bytes / 1e6:>9.3f}  {t.bound}")
    return "\n".join(lines)


def table(prof, sort_by: str = "device_time_total", row_limit: int = 20,
          step: StepEstimate | None = None) -> str:
    """prof.key_averages() with the estimated Trainium time per op as an extra column.
    sort_by: a key_averages attribute (device_time_total, cpu_time_total, count) or
    "estimated_time_total"."""
    step = step or estimate_step()
    estimated = {t.name: t for t in step.by_op()}
    rows = []
    for evt in prof.key_averages():
        t = estimated.get(evt.key)
        rows.append((evt.key, evt.count, evt.cpu_time_total, evt.device_time_total,
                     t.estimated_s * 1e6 if t else 0.0, t.bound if t else ""))
    keys = {"count": 1, "cpu_time_total": 2, "device_time_total": 3, "estimated_time_total": 4}
    if sort_by not in keys:
        raise ValueError(f"sort_by must be one of {sorted(keys)}, got {sort_by!r}")
    rows.sort(key=lambda r: r[keys[sort_by]], reverse=True)
    header = (f"{'Name':<40} {'# Calls':>8} {'CPU total':>12} {'neuron total':>13} "
              f"{'Est. ' + step.profile.name + ' total':>16}  bound")
    out = [header, "-" * len(header)]
    for name, calls, cpu, dev, est, bound in rows[:row_limit]:
        out.append(f"{name[:40]:<40} {calls:>8} {_time(cpu / 1e6):>12} {_time(dev / 1e6):>13} "
                   f"{_time(est / 1e6):>16}  {bound}")
    return "\n".join(out)
