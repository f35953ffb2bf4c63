"""`torchneuron compat models`: every Hugging Face architecture the installed transformers
registers, built tiny from its config with random weights, run on neuron against the CPU
(forward, one training step, greedy generate), plus the real all-MiniLM-L6-v2 weights. Writes
reports/models.{json,md,png}. Pieces: catalog (what), shrink and inputs (tiny configs and
inputs), check (one architecture), jobs (architectures in the shared worker pool), report
(totals, tables, chart), minilm (real weights)."""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", nargs="*", default=None, metavar="PATTERN",
                   help="model types to run (shell patterns, e.g. 'llama' 'bert*'); default all")
    p.add_argument("--sample", action="store_true",
                   help="only the fixed sample the default test suite runs")
    # 600: probing every shrink profile, input set and layout of a model that runs with none
    # (TVP's 48-frame clips) takes over 300 s on the CPU alone, which is no hang on neuron.
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds one architecture may take before it counts as a hang")
    p.add_argument("--chunk", type=int, default=40,
                   help="architectures per worker process (a fresh process bounds memory)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    p.add_argument("--jobs", type=int, default=1,
                   help="worker processes, each running one architecture at a time")
    p.add_argument("--skip-minilm", action="store_true",
                   help="leave out the real-weights MiniLM check")
    p.add_argument("--update", action="store_true",
                   help="merge into the report already in --out: the model types run now replace "
                        "their records, the others (and the MiniLM result) are kept")
    p.add_argument("--needs-timm", action="store_true",
                   help="only the model types the report in --out left untried for want of timm "
                        "(and those an earlier such run tried), merged into it as --update does; "
                        "for the torch 2.14 environment, where timm installs (make "
                        "compat-models-timm)")


def merged(previous: dict, records: list[dict], meta: dict) -> tuple[list[dict], dict]:
    """The previous report's records with this run's in their place (sorted by model type), and
    its meta with this run's command and seconds added to what it says it was made of. The
    report's torch stays the previous one's: records name their own (a run in the torch 2.14
    environment merges the types that need timm into the main environment's report)."""
    fresh = {r["model_type"] for r in records}
    old = previous["meta"]
    # Records written before records named their torch ran under the previous report's.
    kept = [{"torch": old.get("torch"), **r} for r in previous["records"]
            if r["model_type"] not in fresh]
    out = {**old, **{k: v for k, v in meta.items() if k not in ("minilm", "torch")},
           "command": f"{old['command']}, then {meta['command']} ({len(records)} model types)",
           "seconds": old.get("seconds", 0) + meta["seconds"]}
    if "minilm" in meta:
        out["minilm"] = meta["minilm"]
    return sorted(kept + records, key=lambda r: r["model_type"]), out


def _previous(out: str) -> dict:
    """The report already in `out` (models.json), which --update merges into."""
    import json
    import os

    path = os.path.join(out, "models.json")
    if not os.path.exists(path):
        raise SystemExit(f"no report to merge into: {path} does not exist (run the whole "
                         "battery first, e.g. make compat-models)")
    with open(path) as f:
        return json.load(f)


def _select(patterns: list[str] | None, sample: bool, needs_timm: dict | None = None):
    """The architectures to run: all, the fixed sample, those matching `patterns`, or, where
    `needs_timm` is a previous report, those it says need timm (report.needing_timm)."""
    from .catalog import architectures
    from .report import needing_timm
    from .sample import SAMPLE

    archs = architectures()
    if sample:
        patterns = list(SAMPLE)
    if needs_timm is not None:
        patterns = needing_timm(needs_timm)
        if not patterns:
            raise SystemExit("the report names no model type that needs timm")
    if patterns:
        archs = [a for a in archs if any(fnmatch.fnmatch(a.model_type, p) for p in patterns)]
        if not archs:
            raise SystemExit(f"no registered model type matches {patterns}")
    return archs


def _arguments_after(word: str) -> list[str]:
    """The command line after the subcommand, however the program was started (`torchneuron
    compat models ...` or `python -m torchneuron.compat models ...`)."""
    argv = sys.argv[1:]
    return argv[argv.index(word) + 1:] if word in argv else argv


def run(args: argparse.Namespace) -> int:
    import torch
    import transformers
    from tqdm import tqdm

    from . import report
    from .jobs import run_all

    previous = _previous(args.out) if args.update or args.needs_timm else None
    archs = _select(args.only, args.sample, previous if args.needs_timm else None)
    started = time.monotonic()
    bar = tqdm(total=len(archs), unit="arch", file=sys.stderr)
    passed = 0

    def progress(rec: dict) -> None:
        nonlocal passed
        passed += report.outcome(rec) == "pass"
        bar.set_postfix_str(f"{rec['model_type']}: {report.outcome(rec)}; {passed} pass")
        bar.update(1)

    records = run_all(archs, args.timeout, args.chunk, args.threads, progress, max(1, args.jobs))
    bar.close()
    for rec in records:  # a report may merge runs under two torch builds (--update)
        rec["torch"] = torch.__version__
    meta = {"transformers": transformers.__version__, "torch": torch.__version__,
            "command": " ".join(["torchneuron compat models", *_arguments_after("models")]),
            "jobs": args.jobs,
            "seconds": time.monotonic() - started}
    if not args.skip_minilm:
        from .minilm import check_minilm

        meta["minilm"] = check_minilm()
    if previous is not None:
        records, meta = merged(previous, records, meta)
    paths = report.write(records, meta, args.out)
    t = report.totals(records)
    a = t["all_stages"]
    print(f"{t['model_types']} model types, {t['tried']} tried (run on CPU), "
          f"{a['pass_on_neuron']} pass every stage on neuron"
          + (f" ({100 * a['rate']:.1f}%)" if a["rate"] is not None else ""))
    for stage, s in t["stages"].items():
        print(f"  {stage:9s} {s['pass_on_neuron']}/{s['ran_on_cpu']}")
    if "minilm" in meta:
        print(f"  MiniLM real weights: {meta['minilm']}")
    print("report: " + ", ".join(paths.values()))
    return 0
