"""The op battery's report: reports/ops.json (every (op, dtype, variant) with its counts and each
failing sample) and reports/ops.md (totals, pass rates by category and variant, failures grouped
by cause)."""

from __future__ import annotations

import collections
import json
import re

from .cases import VARIANTS, Unit

PASS = "pass"
FAILED = ("mismatch", "error", "crash", "timeout", "abandoned")
# Not in the pass-rate denominator: the CPU itself rejects the sample (and neuron raises the same
# exception), the float64 policy rejects it by design, or the OpInfo cannot build its samples.
EXCLUDED = ("cpu_error", "skipped_policy", "sample_error")


def case_key(unit: Unit, rec: dict) -> str:
    return f"{unit.key}:{rec['variant']}:{rec['sample']}"


class Results:
    def __init__(self):
        self.units: list[tuple[Unit, list[dict]]] = []
        self.seconds: dict[Unit, float | None] = {}

    def add(self, unit: Unit, records: list[dict], seconds: float | None = None) -> None:
        self.units.append((unit, sorted(records, key=lambda r: r["case"])))
        self.seconds[unit] = seconds

    def records(self):
        for unit, recs in self.units:
            for r in recs:
                yield unit, r

    def statuses(self) -> dict[str, str]:
        """case key -> status, for baselines."""
        return {case_key(u, r): r["status"] for u, r in self.records()}

    def totals(self, select=lambda unit, rec: True) -> dict:
        counts = collections.Counter(r["status"] for u, r in self.records() if select(u, r))
        passed = counts[PASS]
        failed = sum(counts[s] for s in FAILED)
        return {
            "cases": sum(counts.values()),
            "passed": passed,
            "failed": failed,
            "skipped_by_policy": counts["skipped_policy"],
            "cpu_rejects": counts["cpu_error"],
            "sample_errors": counts["sample_error"],
            "process_crashes": counts["crash"],
            "values_not_comparable": sum(1 for u, r in self.records()
                                         if select(u, r) and r.get("compared") == "metadata"),
            "pass_rate": passed / (passed + failed) if passed + failed else 1.0,
            "by_status": dict(counts),
        }

    def crashes(self) -> list[tuple[Unit, dict]]:
        """Every case that ended its worker process, in run order."""
        return [(u, r) for u, r in self.records() if r["status"] == "crash"]

    def causes(self) -> list[tuple[str, int, list[str]]]:
        """(cause, cases, ops) for failed cases, most frequent first."""
        groups: dict[str, list] = collections.defaultdict(list)
        for u, r in self.records():
            if r["status"] in FAILED:
                groups[cause_of(r)].append(u.label)
        ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
        return [(c, len(ops), sorted(set(ops))) for c, ops in ranked]

    def to_json(self, meta: dict) -> dict:
        units = []
        for unit, recs in self.units:
            variants = {}
            for v in VARIANTS:
                vr = [r for r in recs if r["variant"] == v]
                if not vr:
                    continue
                counts = collections.Counter(r["status"] for r in vr)
                variants[v] = {
                    "counts": dict(counts),
                    "failures": [{k: r[k] for k in ("sample", "status", "type", "message",
                                                    "max_error", "input")
                                  if r.get(k) is not None}
                                 for r in vr if r["status"] in FAILED + ("sample_error",)],
                }
            units.append({"db": unit.db, "op": unit.op, "layout": unit.layout,
                          "dtype": unit.dtype, "category": unit.category, "seconds": self.seconds.get(unit),
                          "variants": variants})
        return {**meta, "totals": self.totals(), "units": units}


def cause_of(rec: dict) -> str:
    """A failure's message with op names, numbers and result paths made generic, so that one
    bug shows up as one cause."""
    text = rec.get("message", "")
    text = re.sub(r"aten::[\w.]+", "aten::<op>", text)
    text = re.sub(r"\bout(\[[^\]]*\])*", "out", text)
    text = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
    text = re.sub(r"\(N(, N)*,?\)|\[N(, N)*\]", "(shape)", text)
    kind = rec.get("type") or rec["status"]
    return f"{rec['status']} / {kind}: {text[:160]}"


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def markdown(results: Results, meta: dict) -> str:
    t = results.totals()
    out = [
        "# Op conformance battery: neuron vs CPU",
        "",
        f"PyTorch's own OpInfo databases ({', '.join(meta['databases'])}), every supported "
        f"dtype of {', '.join(meta['dtypes'])}, the strided samples and the sparse ones "
        "(COO, CSR, CSC, BSR, BSC) of the OpInfos that sample sparse layouts, each sample run "
        "on neuron and on CPU in the variants forward, backward (gradients vs CPU gradients), "
        "in-place and out=, in worker processes (a crash is a case's record, not the run's "
        "end). "
        f"torch {meta['torch']}, float64 policy `{meta['float64_policy']}`, "
        f"{meta['duration_s'] / 60:.1f} min with {meta['jobs']} worker(s).",
        "",
        f"Command: `{meta['command']}`",
        "",
        "| | cases |",
        "|---|---:|",
        f"| run | {t['cases']} |",
        f"| passed | {t['passed']} |",
        f"| failed | {t['failed']} |",
        f"| skipped by the float64 policy | {t['skipped_by_policy']} |",
        f"| rejected by the CPU too (same exception) | {t['cpu_rejects']} |",
        f"| OpInfo could not build samples | {t['sample_errors']} |",
        f"| process crashes | {t['process_crashes']} |",
        f"| **pass rate** (passed / (passed + failed)) | **{_pct(t['pass_rate'])}** |",
        "",
        f"Of the passes, {t['values_not_comparable']} compare structure, shape, dtype and device "
        "only: ops whose OpInfo declares their values random or undefined.",
        "",
        "## Pass rate by category",
        "",
        "| category | cases | passed | failed | policy | pass rate |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for cat in sorted({u.category for u, _ in results.units}):
        c = results.totals(lambda u, r, cat=cat: u.category == cat)
        out.append(f"| {cat} | {c['cases']} | {c['passed']} | {c['failed']} | "
                   f"{c['skipped_by_policy']} | {_pct(c['pass_rate'])} |")
    out += ["", "## Pass rate by variant", "",
            "| variant | cases | passed | failed | policy | pass rate |",
            "|---|---:|---:|---:|---:|---:|"]
    for v in VARIANTS:
        c = results.totals(lambda u, r, v=v: r["variant"] == v)
        out.append(f"| {v} | {c['cases']} | {c['passed']} | {c['failed']} | "
                   f"{c['skipped_by_policy']} | {_pct(c['pass_rate'])} |")
    policy_ops = sorted({u.label for u, r in results.records()
                         if r["status"] == "skipped_policy" and u.dtype != "float64"})
    if policy_ops:
        out += ["", "Float64-policy skips outside float64 units come from ops asked to compute "
                "in float64 (a dtype=torch.float64 argument, float_power, mixed-dtype samples): "
                + ", ".join(policy_ops) + "."]
    out += ["", "## Process crashes", "",
            "Cases that ended their worker process (a segmentation fault, an abort) instead of "
            "computing a result or raising a Python exception; the worker was replaced and the "
            "run went on with the next case.", ""]
    crashes = results.crashes()
    if not crashes:
        out.append("None.")
    else:
        out += ["| op | dtype | sample | variant | input | how |", "|---|---|---:|---|---|---|"]
        for u, r in crashes:
            out.append(f"| {_md(u.label)} | {u.dtype} | {r['sample']} | {r['variant']} | "
                       f"{_md(r.get('input', ''))} | {_md(r['message'])} |")
    causes = results.causes()
    out += ["", "## Failures by cause", ""]
    if not causes:
        out.append("No failures.")
    else:
        out += ["| cases | cause | ops |", "|---:|---|---|"]
        for cause, n, ops in causes[:40]:
            shown = ", ".join(ops[:8]) + (f" and {len(ops) - 8} more" if len(ops) > 8 else "")
            out.append(f"| {n} | {_md(cause)} | {_md(shown)} |")
        if len(causes) > 40:
            out.append(f"| | {len(causes) - 40} rarer causes: see ops.json | |")
    out.append("")
    return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write(results: Results, meta: dict, folder: str) -> tuple[str, str]:
    import os

    os.makedirs(folder, exist_ok=True)
    json_path, md_path = os.path.join(folder, "ops.json"), os.path.join(folder, "ops.md")
    with open(json_path, "w") as f:
        json.dump(results.to_json(meta), f, indent=1)
    with open(md_path, "w") as f:
        f.write(markdown(results, meta))
    return json_path, md_path
