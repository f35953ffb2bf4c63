"""The readiness report (docs/readiness.md#the-readiness-report): the accounting's summary of the
run, its steps, one step's ops priced by the time model on trn2 and trn3 (step time and MFU,
as one compiled graph and as eager kernels), HBM fit on each, and the five changes that matter
most, each at its file:line. Also the report as terminal lines, and a comparison of two."""

from __future__ import annotations

import copy
import math
from collections import Counter
from typing import Any

import torch

from ..runtime.profiles import MACHINES
from ..timemodel import Layout, price
from ..timemodel.price import mfu
from ..timemodel.trace import Trace

REPORT_SCHEMA = 1
TARGETS = ("trn2", "trn3")
# Nothing publishes what one recompile costs on Trainium; this order of magnitude of a
# neuronx-cc compile of one small graph only ranks recompiles against stalls, it is no estimate.
ASSUMED_COMPILE_S = 1.0
GiB = 1 << 30

SYNC_ADVICE = {
    "item": "keep the value on the device (accumulate a tensor) and read it every N steps",
    "copy to host": "copy to the host less often (log every N steps), or asynchronously",
    "data-dependent shape": "use a fixed-size form (torch.where with a mask) instead of a "
                            "result sized by the data",
    "synchronize": "drop the explicit synchronize unless timing needs it",
    "event synchronize": "wait on the event from a stream instead of the host",
}


def _fallback_advice(reason: str) -> str:
    if "float64" in reason or "complex128" in reason:
        return "compute in float32 or bfloat16 on the device (or move it out of the step)"
    if "sparse" in reason:
        return "use a dense layout on the device"
    return "replace it with ops that lower on Trainium, or move it out of the step"


def _step_dtype(trace: Trace) -> torch.dtype:
    """The dtype of the step's heaviest op's first input: what MFU is measured against."""
    heavy = max((op for op in trace.ops if op.inputs), key=lambda op: op.flops, default=None)
    return heavy.inputs[0].dtype if heavy is not None else torch.float32


def estimate(trace: Trace, peak_bytes: int) -> dict[str, Any]:
    """One step's time and MFU on each target, compiled and eager, and the HBM fit."""
    dtype = _step_dtype(trace)
    layout = Layout()
    result = {}
    for name in TARGETS:
        machine = MACHINES[name]
        graph = price(trace, machine, layout, graph=True)
        eager = price(trace, machine, layout, graph=False)
        lnc = layout.lnc_on(machine)
        hbm = machine.hbm_bytes_per_chip // machine.logical_cores_per_chip(lnc)
        result[name] = {
            "step_seconds_graph": graph.seconds, "step_seconds_eager": eager.seconds,
            "mfu_graph": _finite(mfu(graph, machine, layout, dtype)),
            "mfu_eager": _finite(mfu(eager, machine, layout, dtype)),
            "hbm_bytes": hbm, "fits": peak_bytes <= hbm,
            "stall_seconds": graph.stall_s, "by_op_graph": graph.by_op}
    return {"dtype": str(dtype).replace("torch.", ""), "flops": trace.flops, "ops": len(trace.ops),
            "machines": result}


def _finite(x: float) -> float | None:
    return None if math.isnan(x) else x


def op_table(trace: Trace, machines: dict[str, Any]) -> list[dict[str, Any]]:
    """A row per ATen op of the step: calls, FLOPs, and its priced seconds per target."""
    calls = Counter(op.name + (" (host)" if op.host else "") for op in trace.ops)
    flops: Counter = Counter()
    for op in trace.ops:
        flops[op.name + (" (host)" if op.host else "")] += op.flops
    rows = [{"op": name, "calls": n, "flops": flops[name],
             **{f"{m}_seconds": machines[m]["by_op_graph"].get(name, 0.0) for m in machines}}
            for name, n in calls.items()]
    rows.sort(key=lambda r: (-r.get("trn2_seconds", 0.0), -r["calls"], r["op"]))
    return rows


def changes(summary: dict[str, Any], steady: dict[str, Any] | None = None,
            limit: int = 5) -> list[dict[str, Any]]:
    """The changes that matter most, by what each costs a run on trn2 (host stalls from the
    machine's figures, recompiles at ASSUMED_COMPILE_S); what TorchNeuron refuses or what does
    not fit comes first, as it fails rather than slows. Shape recompiles count from `steady` (the
    summary at the end of the first step run without the op recorder, steps.py): the first
    steps' new shapes are compiled once, in warm-up; a new shape later is a compile in the
    middle of training. With no such step (a short run), no shape recompile is ranked."""
    trn2 = MACHINES["trn2"]
    found: list[dict[str, Any]] = []
    for use in summary["dynamo"]["dynamic_shapes"]:
        found.append({"kind": "dynamic shapes", "location": use["location"], "cost_seconds": None,
                      "what": f"{use['kind']}: TorchNeuron's torch.compile refuses it",
                      "change": "compile with static shapes (pad inputs to a few sizes)"})
    mem = summary["memory"]
    if mem.get("fits") is False:
        found.append({"kind": "memory", "location": "", "cost_seconds": None,
                      "what": f"peak {mem['peak_bytes'] / GiB:.2f} GiB exceeds the "
                              f"{mem['hbm_bytes'] / GiB:.0f} GiB of HBM",
                      "change": "see torch.neuron.memory.explain() for what would make it fit"})
    for r in summary["host_fallbacks"]["ops"]:
        moved = r["bytes_to_host"] + r["bytes_from_host"]
        found.append({"kind": "host fallback", "location": r["location"],
                      "cost_seconds": r["calls"] * trn2.host_sync_s
                      + moved / trn2.host_link_bandwidth,
                      "what": f"{r['op']} runs on the host ({r['reason']}), {r['calls']} calls",
                      "change": _fallback_advice(r["reason"])})
    for r in summary["syncs"]["sites"]:
        found.append({"kind": "sync", "location": r["location"],
                      "cost_seconds": r["count"] * trn2.host_sync_s,
                      "what": f"{r['cause']} ({r['op']}) waits for the device, {r['count']}x",
                      "change": SYNC_ADVICE.get(r["cause"], "avoid reading device values")})
    warm = {(r["op"], r["location"]): r["recompiles"]
            for r in (steady or summary)["signatures"]["sites"]}
    for r in summary["signatures"]["sites"]:
        later = r["recompiles"] - warm.get((r["op"], r["location"]), 0)
        if later > 0:
            found.append({"kind": "recompile", "location": r["location"],
                          "cost_seconds": later * ASSUMED_COMPILE_S,
                          "what": f"{r['op']} sees a new shape after the first step: "
                                  f"{later} recompiles",
                          "change": "pad to a few fixed shapes (buckets) so each compiles once"})
    for r in summary["dynamo"]["reasons"]:
        found.append({"kind": "recompile", "location": r["location"],
                      "cost_seconds": ASSUMED_COMPILE_S,
                      "what": f"Dynamo recompiles {r['function']}: {r['reason']}",
                      "change": "keep the guarded value fixed across calls"})
    found.sort(key=lambda c: (c["cost_seconds"] is not None, -(c["cost_seconds"] or 0.0)))
    return found[:limit]


FIT_WORDS = {True: "fits", False: "DOES NOT FIT",
             None: "unknown (the run ran out of memory on a smaller HBM)"}


def _fmt_s(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def format_report(report: dict[str, Any]) -> str:
    """The report as the lines the command prints."""
    from ..device.accounting import format_summary

    steps = report["steps"]
    ends = {"optimizer": "optimizer.step()", "profiler": "a profiler's step()",
            "forward": "a top-level forward"}.get(steps["kind"])
    head = f"torchneuron readiness: {report['script']}: {report['status']}"
    if report["status"] != "ok":
        head += f" (exit {report['exit_code']})"
    lines = [head, f"  {steps['count']} steps" + (f" ending at {ends}" if ends else "")
             + f", {report['wall_seconds']:.1f} s on the software NeuronCore"]
    if report["error"]:
        first = (report["error"]["message"].splitlines() or [""])[0]
        lines.append(f"  the script raised {report['error']['type']}: "
                     f"{first} (at {report['error']['location']})")
    for row in report.get("ranks") or []:
        lines.append(f"  rank {row['rank']}: {row['status']}, {row['steps']} steps, "
                     f"{row['host_fallbacks']} host fallback calls, {row['syncs']} syncs, "
                     f"{row['recompiles']} recompiles, peak {row['peak_bytes'] / GiB:.3f} GiB")
    if not report["touched_neuron"]:
        lines.append("  the script never used the neuron device: nothing of it would run on "
                     "Trainium. Move the model and its inputs to 'neuron' (model.to('neuron')).")
        return "\n".join(lines)
    lines.append(format_summary(report["accounting"]))
    est = report["estimate"]
    peak = report["accounting"]["memory"]["peak_bytes"]
    which = (f"step {report['traced_step']}" if report["traced_step"] else "all ops recorded")
    lines.append(f"estimated step ({which}: {est['ops']} ops, {est['flops'] / 1e9:.3f} GFLOP, "
                 f"{est['dtype']}):")
    for name, m in est["machines"].items():
        lines.append(f"  {name}: {_fmt_s(m['step_seconds_graph'])} as one compiled graph "
                     f"(MFU {_pct(m['mfu_graph'])}), {_fmt_s(m['step_seconds_eager'])} eager "
                     f"(MFU {_pct(m['mfu_eager'])}); peak {peak / GiB:.3f} GiB of "
                     f"{m['hbm_bytes'] / GiB:.0f} GiB HBM: {FIT_WORDS[m['fits']]}")
    lines.append("changes that matter most:" if report["changes"] else
                 "changes that matter most: none found")
    for i, c in enumerate(report["changes"], 1):
        cost = ("" if c["cost_seconds"] is None or c["kind"] == "recompile"
                else f" (~{_fmt_s(c['cost_seconds'])} of stalls on trn2)")
        lines.append(f"  {i}. {c['location'] or '(whole run)'}: {c['what']}{cost}\n"
                     f"     -> {c['change']}")
    return "\n".join(lines)


def merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The ranks' reports as one: the lowest rank's report (the ranks of a data-parallel step
    run the same ops), its status and exit code the worst of all, with a row per rank of the
    figures that can differ between ranks."""
    ordered = sorted(reports, key=lambda r: (r["rank"] is None, r["rank"] or 0))
    merged = copy.deepcopy(ordered[0])
    failed = [r for r in ordered if r["exit_code"]]
    if failed:
        merged.update(status=failed[0]["status"], exit_code=failed[0]["exit_code"],
                      error=failed[0]["error"])
    merged["touched_neuron"] = any(r["touched_neuron"] for r in ordered)
    merged["rank"] = None
    merged["ranks"] = [{
        "rank": r["rank"], "status": r["status"], "exit_code": r["exit_code"],
        "steps": r["steps"]["count"], "host_fallbacks": r["accounting"]["host_fallbacks"]["calls"],
        "syncs": r["accounting"]["syncs"]["count"], "recompiles": r["accounting"]["recompiles"],
        "peak_bytes": r["accounting"]["memory"]["peak_bytes"],
        "trn2_step_seconds_graph": r["estimate"]["machines"]["trn2"]["step_seconds_graph"]}
        for r in ordered]
    return merged


# What a regression is: a count that grew, a step that got slower, a fit that was lost.
COMPARED = (("host fallback calls", lambda r: r["accounting"]["host_fallbacks"]["calls"]),
            ("host syncs", lambda r: r["accounting"]["syncs"]["count"]),
            ("recompiles", lambda r: r["accounting"]["recompiles"]),
            ("dynamic-shape uses", lambda r: len(r["accounting"]["dynamo"]["dynamic_shapes"])),
            ("peak memory bytes", lambda r: r["accounting"]["memory"]["peak_bytes"]),
            ("trn2 step seconds (graph)",
             lambda r: r["estimate"]["machines"]["trn2"]["step_seconds_graph"]),
            ("trn3 step seconds (graph)",
             lambda r: r["estimate"]["machines"]["trn3"]["step_seconds_graph"]))


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Each compared figure, old and new, regressions (it grew) first."""
    rows = []
    for name, get in COMPARED:
        try:
            a, b = get(old), get(new)
        except (KeyError, TypeError):
            continue  # a report of a run that never reached the device has no estimate
        rows.append({"figure": name, "old": a, "new": b, "regression": b > a * 1.001 + 1e-12})
    rows.sort(key=lambda r: not r["regression"])
    return rows


def format_compare(rows: list[dict[str, Any]]) -> str:
    regressions = [r for r in rows if r["regression"]]
    lines = [f"compared with the old report: {len(regressions)} regression(s)"]
    for r in rows:
        mark = "REGRESSION" if r["regression"] else "ok"
        lines.append(f"  {mark:10} {r['figure']}: {r['old']:g} -> {r['new']:g}")
    return "\n".join(lines)
