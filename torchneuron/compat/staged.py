"""Staged cases, the shape of the small batteries (diffusers, PEFT, sentence-transformers): a
case is a generator function `case(device)` that builds everything on the CPU from a fixed seed,
moves it to `device`, and yields `(stage, result)` pairs in order (forward, train, merge, ...).
It runs once on the CPU and once on neuron; each neuron stage is judged against the CPU's.

A stage that raises on the CPU is "cpu_fail" (the case says nothing about neuron there), one that
raises or differs on neuron is "fail"; stages after the first failure are "n/a". The record has
the same keys as the model battery's (status per stage, cause, max_abs_error, seconds), which is
what the reports read."""

from __future__ import annotations

import random
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from .judge import Mismatch, compare_leaves, flatten

PASS, FAIL, CPU_FAIL, NA = "pass", "fail", "cpu_fail", "n/a"
SEED = 0


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    run: Callable[[str], Iterator[tuple[str, Any]]]
    stages: tuple[str, ...]  # what `run` yields, in order (a subset of the battery's stages)
    # Per-stage tolerances (atol, rtol); assert_close's defaults elsewhere. Denoising loops and
    # optimizer steps compound rounding, so their stages may allow more.
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)


def seed_everything() -> None:
    random.seed(SEED)
    torch.manual_seed(SEED)  # seeds neuron's generators too


def _cause(e: BaseException) -> str:
    while e.__cause__ is not None:
        e = e.__cause__
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


def _leaves(result) -> list[tuple[str, Any]]:
    # Results may hold numpy arrays (pipeline images): the judge compares tensors.
    def as_tensor(x):
        return torch.from_numpy(x) if type(x).__module__ == "numpy" and hasattr(x, "dtype") else x

    return [(p, as_tensor(x)) for p, x in flatten(result)]


def _judge(stage: str, got, expected, tolerance) -> float:
    atol, rtol = tolerance if tolerance else (None, None)
    got_leaves, expected_leaves = _leaves(got), _leaves(expected)
    # Host results (numpy images, Python floats) are compared where they are; tensors must
    # come back on neuron when the CPU's came back on the CPU.
    on_device = any(isinstance(x, torch.Tensor) and x.device.type == "neuron" for _, x in got_leaves)
    try:
        return compare_leaves(got_leaves, expected_leaves, atol, rtol,
                              device="neuron" if on_device else "cpu", measure=True)
    except Mismatch as m:
        worst = f" (max abs {m.max_error:.3g})" if m.max_error is not None else ""
        raise Mismatch(f"{stage}: {m}{worst}", m.max_error) from None


def run_case(case: Case, stages: tuple[str, ...]) -> dict:
    """The report record of one case; never raises for the case's own failure."""
    rec: dict[str, Any] = {"name": case.name, "family": case.family, **{s: NA for s in stages},
                           "max_abs_error": {}, "seconds": {"cpu": 0.0, "neuron": 0.0},
                           "cause": None, "traceback": None}

    def fail(stage: str, status: str, where: str, e: BaseException) -> None:
        rec[stage] = status
        rec["cause"] = f"{where} {stage}: {_cause(e)}"
        rec["traceback"] = traceback.format_exc(limit=-6)

    expected: list[tuple[str, Any]] = []
    seed_everything()
    steps = case.run("cpu")
    started = time.perf_counter()
    try:
        for stage, result in steps:
            expected.append((stage, result))
    except Exception as e:  # noqa: BLE001 - the CPU cannot run the case: cpu_fail
        fail(case.stages[min(len(expected), len(case.stages) - 1)], CPU_FAIL, "cpu", e)
    rec["seconds"]["cpu"] = time.perf_counter() - started

    seed_everything()
    steps = case.run("neuron")
    started = time.perf_counter()
    passed = 0
    try:
        for (stage, want), (got_stage, got) in zip(expected, steps):
            assert got_stage == stage, f"neuron yielded {got_stage} where the CPU yielded {stage}"
            rec["max_abs_error"][stage] = _judge(stage, got, want, case.tolerances.get(stage))
            rec[stage] = PASS
            passed += 1
    except Exception as e:  # noqa: BLE001 - a neuron error or difference: fail
        fail(case.stages[passed], FAIL, "neuron", e)
    rec["seconds"]["neuron"] = time.perf_counter() - started
    return rec


def totals(records: list[dict], stages: tuple[str, ...]) -> dict:
    """Per stage: how many ran on the CPU and how many of those passed on neuron."""
    out: dict[str, Any] = {"cases": len(records), "stages": {}}
    for stage in stages:
        ran = [r for r in records if r[stage] not in (CPU_FAIL, NA)]
        passed = sum(r[stage] == PASS for r in ran)
        out["stages"][stage] = {"ran_on_cpu": len(ran), "pass_on_neuron": passed}
    runnable = [r for r in records if all(r[s] != CPU_FAIL for s in stages)]
    out["all_stages"] = {"runnable_on_cpu": len(runnable),
                         "pass_on_neuron": sum(all(r[s] in (PASS, NA) for s in stages)
                                               and any(r[s] == PASS for s in stages)
                                               for r in runnable)}
    return out


def run_battery(name: str, cases: list[Case], stages: tuple[str, ...], out: str) -> dict:
    """Runs every case, writes reports/<name>.{json,md}; returns the JSON document."""
    import json
    import os

    import sys

    from tqdm import tqdm

    started = time.monotonic()
    records = []
    with tqdm(cases, unit="case", desc=name, file=sys.stderr, leave=False) as bar:
        for case in bar:
            bar.set_postfix_str(case.name)
            records.append(run_case(case, stages))
    doc = {"meta": {"battery": name, "torch": torch.__version__, "stages": list(stages),
                    "seconds": time.monotonic() - started},
           "totals": totals(records, stages), "records": records}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(markdown(doc))
    return doc


def markdown(doc: dict) -> str:
    meta, t, stages = doc["meta"], doc["totals"], doc["meta"]["stages"]
    lines = [f"# {meta['battery']} battery", "", f"torch {meta['torch']}; {meta['seconds']:.0f} s.",
             ""] + _model_throughput(doc["records"]) + [
             "| stage | ran on CPU | pass on neuron |", "|---|---|---|"]
    lines += [f"| {s} | {v['ran_on_cpu']} | {v['pass_on_neuron']} |" for s, v in t["stages"].items()]
    a = t["all_stages"]
    lines += [f"| **every stage** | {a['runnable_on_cpu']} | {a['pass_on_neuron']} |", "",
              "| case | family | " + " | ".join(stages) + " | max abs err | s CPU | s neuron | cause |",
              "|---|---|" + "---|" * len(stages) + "---|---|---|---|"]
    for r in doc["records"]:
        errs = " / ".join(f"{k} {v:.1e}" for k, v in r["max_abs_error"].items())
        cause = (r["cause"] or "").replace("|", "/")[:160]
        lines.append(f"| {r['name']} | {r['family']} | " + " | ".join(r[s] for s in stages)
                     + f" | {errs} | {r['seconds']['cpu']:.2f} | {r['seconds']['neuron']:.2f} | {cause} |")
    return "\n".join(lines) + "\n"


def _model_throughput(records: list[dict]) -> list[str]:
    """Models per minute, for a battery whose cases include models (torchvision's builders are
    family "model:<task>", timm's "timm:<module>"): their count over the time their cases took,
    CPU and neuron sides together."""
    models = [r for r in records if r["family"].startswith(("model:", "timm:"))]
    seconds = sum(r["seconds"]["cpu"] + r["seconds"]["neuron"] for r in models)
    if not models or seconds <= 0:
        return []
    return [f"Models: {len(models)} in {seconds:.0f} s of their cases (both devices), "
            f"{60 * len(models) / seconds:.1f} per minute.", ""]


def print_summary(doc: dict) -> int:
    """One line per stage on stdout; exit code 0 (regressions are `compat all`'s business)."""
    a = doc["totals"]["all_stages"]
    print(f"{doc['meta']['battery']}: {doc['totals']['cases']} cases, {a['runnable_on_cpu']} run on "
          f"CPU, {a['pass_on_neuron']} pass every stage on neuron")
    for stage, s in doc["totals"]["stages"].items():
        print(f"  {stage:9s} {s['pass_on_neuron']}/{s['ran_on_cpu']}")
    for r in doc["records"]:
        if r["cause"]:
            print(f"  {r['name']}: {r['cause']}")
    return 0


def select(cases: list[Case], patterns: list[str] | None) -> list[Case]:
    """The cases whose names match a shell pattern; all without patterns."""
    import fnmatch

    chosen = [c for c in cases if not patterns or any(fnmatch.fnmatch(c.name, p) for p in patterns)]
    if not chosen:
        raise SystemExit(f"no case matches {patterns}")
    return chosen


def quiet() -> None:
    """Offline, and without the deprecation notes tiny configs draw from the libraries."""
    import logging
    import os
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
