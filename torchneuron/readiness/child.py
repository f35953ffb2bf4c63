"""The process the readiness command starts: `python -m torchneuron.readiness.child OUT
[--per-rank] script.py [args]` runs the script unchanged as `__main__` (its sys.argv and sys.path as
`python script.py` would set them) with the accounting on from the first line and the step
watcher installed, then writes OUT/report.json and OUT/report.html, whatever the script did:
an exception or a non-zero sys.exit is part of the report and of this process's exit status.
Under torchrun (`--per-rank`) each process writes OUT/report.rank<R>.json and .html, R the rank
its process group had at a step's end (its process id when it never had one)."""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
import traceback
from typing import Any

import torch

from ..device import accounting
from . import html_page, report as report_module
from .steps import StepWatcher


def _error(exc: BaseException, script: str) -> dict[str, Any]:
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if os.path.abspath(f.filename) == os.path.abspath(script)]
    at = (mine or frames)[-1] if (mine or frames) else None
    return {"type": type(exc).__name__, "message": str(exc),
            "location": f"{os.path.relpath(at.filename)}:{at.lineno}" if at else "",
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}


def run_script(script: str, args: list[str]) -> dict[str, Any]:
    """Runs the script and gives the report (docs/readiness.md#the-readiness-report)."""
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    accounting.start()
    accounting.reset_readiness()
    watcher = StepWatcher()
    watcher.install()
    status, exit_code, error = "ok", 0, None
    began = time.perf_counter()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        exit_code = code if isinstance(code, int) else (0 if code is None else 1)
        if exit_code:
            status, error = "exited", {"type": "SystemExit", "message": str(code),
                                       "location": "", "traceback": ""}
    except BaseException as exc:  # the report says what ran before it, and the error
        status, exit_code, error = "raised", 1, _error(exc, script)
    finally:
        watcher.remove()
    wall = time.perf_counter() - began
    summary = accounting.readiness_summary()
    accounting.stop()
    trace, traced_step = watcher.step_trace()
    estimate = report_module.estimate(trace, summary["memory"]["peak_bytes"])
    ops = report_module.op_table(trace, estimate["machines"])
    if error is not None and error["type"] == "OutOfMemoryError":
        # The failed allocation is in no peak: a target with no more HBM than the software
        # NeuronCore's does not fit; one with more might.
        ran_out_at = summary["memory"]["hbm_bytes"] or 0
        summary["memory"]["fits"] = False
        for machine in estimate["machines"].values():
            machine["fits"] = False if machine["hbm_bytes"] <= ran_out_at else None
    for machine in estimate["machines"].values():
        machine.pop("by_op_graph")
    touched = torch.neuron.is_initialized() and (summary["signatures"]["count"] > 0
                                                 or summary["memory"]["peak_bytes"] > 0)
    return {"schema": report_module.REPORT_SCHEMA, "script": script, "argv": args,
            "status": status, "exit_code": exit_code, "error": error, "touched_neuron": touched,
            "wall_seconds": wall, "rank": watcher.rank,
            "steps": {"kind": watcher.kind, "count": watcher.total_steps, "rows": watcher.steps},
            "traced_step": traced_step, "accounting": summary, "estimate": estimate,
            "ops": ops, "changes": _oom_first(error, report_module.changes(
                summary, watcher.steady_summary))}


def _oom_first(error: dict[str, Any] | None, changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run that ran out of device memory did not fit the HBM (the software NeuronCore has a
    Trainium rank's): that is the first change, with the advisor's suggestions, which the
    device's out-of-memory message carries (docs/memory.md)."""
    if error is None or error["type"] != "OutOfMemoryError":
        return changes
    advice = error["message"].split("Changes that would free room", 1)
    return [{"kind": "memory", "location": error["location"], "cost_seconds": None,
             "what": "out of device memory: the step does not fit the HBM",
             "change": ("changes that would free room" + advice[1]).strip() if len(advice) > 1
             else "see torch.neuron.memory.explain(step, model, optimizer)"}, *changes][:5]


def write(report: dict[str, Any], out: str, name: str = "report") -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(out, name + ".html"), "w") as f:
        f.write(html_page.render(report))


def main(argv: list[str]) -> int:
    out, *rest = argv
    per_rank = rest[:1] == ["--per-rank"]
    script, *args = rest[1:] if per_rank else rest
    report = run_script(script, args)
    name = "report"
    if per_rank:
        name += f".rank{report['rank']}" if report["rank"] is not None else f".pid{os.getpid()}"
    write(report, out, name)
    return report["exit_code"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
