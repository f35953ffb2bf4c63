"""The model battery's report: totals per stage, reports/models.json (every record),
reports/models.md (a table per architecture) and reports/models.png (status by family).

Counting: an architecture whose stage fails on the CPU ("cpu_fail") or that the battery cannot
build at all is "not buildable/runnable on CPU" and is left out of that stage's denominator; it
is not a neuron failure. A crash or hang counts against neuron."""

from __future__ import annotations

import collections
import json
import os

from .check import CPU_FAIL, FAIL, NA, PASS, STAGES


def outcome(rec: dict) -> str:
    """One word per architecture for the chart: pass, neuron fail, or not runnable on CPU."""
    statuses = [rec[s] for s in STAGES]
    if rec["build"] == CPU_FAIL or rec["forward"] == CPU_FAIL:
        return "not runnable on CPU"
    if any(s not in (PASS, NA, CPU_FAIL) for s in statuses):
        return "neuron fail"
    return "pass"


def totals(records: list[dict]) -> dict:
    """Per stage: how many ran on the CPU (the denominator) and how many of those passed."""
    # "model types": every type of the auto mappings that was run; "tried": those whose tiny
    # model builds and runs forward on the CPU (only those say anything about neuron).
    tried = sum(outcome(r) != "not runnable on CPU" for r in records)
    out = {"model_types": len(records), "tried": tried,
           "tried_rate": tried / len(records) if records else None,
           "buildable_on_cpu": sum(r["build"] not in (CPU_FAIL,) for r in records),
           "runnable_on_cpu": tried,
           "float64_allowed": sum(bool(r.get("float64_allowed")) for r in records),
           "stages": {}}
    for stage in STAGES:
        ran = [r for r in records if r[stage] not in (CPU_FAIL, NA)]
        passed = sum(r[stage] == PASS for r in ran)
        out["stages"][stage] = {"ran_on_cpu": len(ran), "pass_on_neuron": passed,
                                "rate": passed / len(ran) if ran else None}
    runnable = [r for r in records if outcome(r) != "not runnable on CPU"]
    all_pass = sum(outcome(r) == "pass" for r in runnable)
    out["all_stages"] = {"runnable_on_cpu": len(runnable), "pass_on_neuron": all_pass,
                         "rate": all_pass / len(runnable) if runnable else None}
    return out


def failure_causes(records: list[dict], top: int = 15) -> list[tuple[str, int]]:
    """Neuron failure causes, grouped by their first words (ids and numbers vary)."""
    causes = collections.Counter()
    for r in records:
        if outcome(r) == "neuron fail":
            causes[(r["cause"] or "?")[:90]] += 1
    return causes.most_common(top)


# timm imports torchvision, whose PyPI build is CUDA's and cannot be imported beside the main
# environment's torch 2.13 CPU build; timm installs in the torch 2.14 environment (.venv-214).
NEEDS_TIMM = "needs timm (installs only beside torch 2.14: `make compat-models-timm`)"


def untried_reason(rec: dict) -> str:
    """The cause of an untried type with sizes and names made generic, so one shortcoming of the
    battery (or one missing package) is one group."""
    import re

    cause = rec["cause"] or "?"
    if "requires the timm library" in cause or "timm" in cause.split(":")[-1]:
        return NEEDS_TIMM
    cause = re.sub(r"\d+", "N", cause)
    cause = re.sub(r"'[^']*'|`[^`]*`", "'...'", cause)
    return cause[:110]


def untried_by_reason(records: list[dict]) -> list[tuple[str, list[str]]]:
    """(reason, model types) for every untried type, the largest group first."""
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for r in records:
        if outcome(r) == "not runnable on CPU":
            groups[untried_reason(r)].append(r["model_type"])
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def main_torch(meta: dict) -> str | None:
    """The report's own torch: the one its first run ran under (`--update` keeps it); records
    under another were merged in from a run in another environment (make compat-models-timm)."""
    return meta.get("torch")


def record_torch(rec: dict, meta: dict) -> str | None:
    """The torch a record ran under (a record without one ran under the report's own)."""
    return rec.get("torch") or main_torch(meta)


def torch_versions(records: list[dict], meta: dict) -> collections.Counter:
    """How many records ran under each torch."""
    return collections.Counter(record_torch(r, meta) for r in records)


def needing_timm(previous: dict) -> list[str]:
    """The model types of a report (models.json's content) to run where timm is: those left
    untried for want of it, and those an earlier such run put there (they ran under another
    torch than the report's own), so the run can be repeated."""
    records, meta = previous["records"], previous["meta"]
    main = main_torch(meta)
    return [r["model_type"] for r in records
            if (outcome(r) == "not runnable on CPU" and untried_reason(r) == NEEDS_TIMM)
            or record_torch(r, meta) != main]


def _torch_note(records: list[dict], meta: dict) -> str:
    """The torch the report ran under and, where records were merged in from another one, how
    many model types ran under each."""
    versions = torch_versions(records, meta)
    main = main_torch(meta)
    if len(versions) <= 1:
        return f"torch {main}"
    others = "; ".join(
        f"torch {v} ({n} model types: "
        + ", ".join(r["model_type"] for r in records if record_torch(r, meta) == v)
        + ")" for v, n in versions.most_common() if v != main)
    return f"torch {main} ({versions[main]} model types); {others}"


def _fmt_err(rec: dict) -> str:
    errs = rec.get("max_abs_error") or {}
    return " / ".join(f"{errs[k]:.1e}" for k in ("forward", "backward") if k in errs) or ""


def markdown(records: list[dict], meta: dict) -> str:
    t = totals(records)
    lines = ["# Model compatibility battery", "",
             f"transformers {meta.get('transformers')}, {_torch_note(records, meta)}; "
             f"command: `{meta.get('command')}`; {meta.get('seconds', 0):.0f} s.", "",
             "| | count |", "|---|---|",
             f"| model types | {t['model_types']} |",
             f"| tried (tiny model builds and runs forward on the CPU) | {t['tried']} "
             f"({100 * (t['tried_rate'] or 0):.1f}%) |",
             f"| buildable on CPU (tiny config) | {t['buildable_on_cpu']} |",
             f"| computed in float64 (a host fallback) | {t['float64_allowed']} |", "",
             "| stage | ran on CPU | pass on neuron | rate |", "|---|---|---|---|"]
    for stage, s in t["stages"].items():
        rate = f"{100 * s['rate']:.1f}%" if s["rate"] is not None else "-"
        lines.append(f"| {stage} | {s['ran_on_cpu']} | {s['pass_on_neuron']} | {rate} |")
    a = t["all_stages"]
    rate = f"{100 * a['rate']:.1f}%" if a["rate"] is not None else "-"
    lines += [f"| **every stage** | {a['runnable_on_cpu']} | {a['pass_on_neuron']} | {rate} |", ""]
    m = meta.get("minilm")
    if m:
        lines += [f"Real weights (all-MiniLM-L6-v2, {m['sentences']} sentences, neuron vs CPU "
                  f"cosine, required >= {m['min_cosine']}): float32 min {m['float32']['min']:.8f} "
                  f"({'ok' if m['float32']['ok'] else 'FAIL'}), bfloat16 autocast min "
                  f"{m['bfloat16']['min']:.8f} ({'ok' if m['bfloat16']['ok'] else 'FAIL'}).", ""]
    causes = failure_causes(records)
    if causes:
        lines += ["## Neuron failures by cause", "", "| cause | architectures |", "|---|---|"]
        lines += [f"| {c.replace('|', '/')} | {n} |" for c, n in causes] + [""]
    untried = untried_by_reason(records)
    if untried:
        lines += ["## Untried model types by reason", "",
                  "| reason | count | model types |", "|---|---|---|"]
        lines += [f"| {reason.replace('|', '/')} | {len(types)} | {', '.join(types)} |"
                  for reason, types in untried] + [""]
    # A torch column only where records ran under several (merged from another environment).
    several = len(torch_versions(records, meta)) > 1
    lines += ["## Per architecture", "",
              "| model type | class | family | build | forward | backward | generate | "
              "max abs err (fwd / bwd) | s CPU | s neuron | " + ("torch | " if several else "")
              + "cause |",
              "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if several else "") + "---|"]
    for r in records:
        cause = (r["cause"] or "").replace("|", "/")[:120]
        f64 = " (float64 allowed)" if r.get("float64_allowed") else ""
        ran_under = f"{record_torch(r, meta)} | " if several else ""
        lines.append(f"| {r['model_type']} | {r['class']} | {r['family']} | {r['build']} | "
                     f"{r['forward']} | {r['backward']} | {r['generate']} | {_fmt_err(r)} | "
                     f"{r['seconds']['cpu']:.2f} | {r['seconds']['neuron']:.2f} | {ran_under}"
                     f"{cause}{f64} |")
    return "\n".join(lines) + "\n"


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = ("pass", "neuron fail", "not runnable on CPU")
    colors = {"pass": "#2e7d32", "neuron fail": "#c62828", "not runnable on CPU": "#9e9e9e"}
    families = sorted({r["family"] for r in records})
    counts = {k: [sum(outcome(r) == k for r in records if r["family"] == f) for f in families]
              for k in kinds}
    fig, ax = plt.subplots(figsize=(12, 4.5))
    left = [0] * len(families)
    for k in kinds:
        ax.barh(families, counts[k], left=left, color=colors[k], label=k)
        left = [a + b for a, b in zip(left, counts[k])]
    ax.set_xlabel("architectures")
    ax.set_title("Hugging Face architectures on neuron vs CPU, by family")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(records: list[dict], meta: dict, folder: str) -> dict[str, str]:
    os.makedirs(folder, exist_ok=True)
    paths = {k: os.path.join(folder, f"models.{k}") for k in ("json", "md", "png")}
    with open(paths["json"], "w") as f:
        json.dump({"meta": meta, "totals": totals(records), "records": records}, f, indent=1,
                  default=str)
    with open(paths["md"], "w") as f:
        f.write(markdown(records, meta))
    chart(records, paths["png"])
    return paths
