"""One outcome word per case of every battery, read from a run folder's JSON reports, and the
comparison of two runs: what `compat all` prints and the HTML report charts.

Outcomes: "pass", "fail" (neuron fails or differs), and "not run" (the CPU cannot run it either,
the float64 policy skips it, or it was not selected). A regression is a case that passed in the
earlier run and does not now; a new pass the reverse."""

from __future__ import annotations

import json
import os

PASS, FAIL, NOT_RUN = "pass", "fail", "not run"
BATTERIES = ("ops", "models", "diffusers", "peft", "sentence-transformers", "vision", "timm")
_OPS_FAILED = ("mismatch", "error", "crash", "timeout", "abandoned")


def _ops(doc: dict) -> dict[str, str]:
    out = {}
    for unit in doc["units"]:
        for variant, v in unit["variants"].items():
            counts = v["counts"]
            key = f"{unit['db']}:{unit['op']}:{unit['dtype']}:{variant}"
            if any(counts.get(s) for s in _OPS_FAILED):
                out[key] = FAIL
            else:
                out[key] = PASS if counts.get("pass") else NOT_RUN
    return out


def _models(doc: dict) -> dict[str, str]:
    from .models.report import outcome

    words = {"pass": PASS, "neuron fail": FAIL}
    return {r["model_type"]: words.get(outcome(r), NOT_RUN) for r in doc["records"]}


def _staged(doc: dict) -> dict[str, str]:
    stages = doc["meta"]["stages"]
    out = {}
    for r in doc["records"]:
        statuses = [r[s] for s in stages]
        if "cpu_fail" in statuses:
            out[r["name"]] = NOT_RUN
        elif all(s in ("pass", "n/a") for s in statuses):
            out[r["name"]] = PASS
        else:
            out[r["name"]] = FAIL
    return out


def read(folder: str) -> dict[str, dict[str, str]]:
    """battery -> case -> outcome, for every battery report the folder holds."""
    readers = {"ops": _ops, "models": _models}
    out = {}
    for battery in BATTERIES:
        path = os.path.join(folder, f"{battery}.json")
        if os.path.exists(path):
            with open(path) as f:
                out[battery] = readers.get(battery, _staged)(json.load(f))
    return out


def compare(before: dict[str, dict[str, str]], now: dict[str, dict[str, str]]) -> dict:
    """Per battery present in both runs: regressions, new passes, and how many are unchanged."""
    out = {}
    for battery in now:
        if battery not in before:
            continue
        old, new = before[battery], now[battery]
        out[battery] = {
            "regressions": sorted(k for k, s in new.items() if old.get(k) == PASS and s != PASS)
            + sorted(k for k in old if k not in new and old[k] == PASS),
            "new_passes": sorted(k for k, s in new.items() if s == PASS and old.get(k) != PASS),
            "unchanged": sum(1 for k, s in new.items() if old.get(k) == s),
        }
    return out


def comparison_markdown(diff: dict, before: str) -> str:
    """Regressions first, then new passes, then the unchanged counts."""
    lines = [f"# Compared with {before}", ""]
    for title, key in (("Regressions", "regressions"), ("New passes", "new_passes")):
        lines += [f"## {title}", ""]
        rows = [(b, k) for b, d in diff.items() for k in d[key]]
        lines += [f"- {b}: {k}" for b, k in rows] or ["none"]
        lines.append("")
    lines += ["## Unchanged", ""] + [f"- {b}: {d['unchanged']} cases" for b, d in diff.items()]
    return "\n".join(lines) + "\n"
