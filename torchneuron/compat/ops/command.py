"""`torchneuron compat ops`: PyTorch's OpInfo databases run on neuron against the CPU (see
cases for what runs, runner for how one case is judged, jobs for how units run in the shared
worker pool, report for the report)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .cases import DTYPE_NAMES, LAYOUTS, VARIANTS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ops", nargs="+", metavar="GLOB",
                   help="only OpInfos whose name matches one of these globs, e.g. 'linalg.*' add")
    p.add_argument("--dtypes", nargs="+", choices=list(DTYPE_NAMES), help="only these dtypes")
    p.add_argument("--db", nargs="+", choices=("op_db", "python_ref_db", "foreach"),
                   help="only these OpInfo databases (default: all)")
    p.add_argument("--layouts", nargs="+", choices=list(LAYOUTS),
                   help="only samples in these layouts (default: strided and every sparse layout "
                        "an OpInfo samples)")
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: one per CPU)")
    p.add_argument("--case-timeout", type=float, default=120.0,
                   help="seconds one case may run before its worker is replaced")
    p.add_argument("--baseline", metavar="JSON",
                   help="fail (exit 1) if a case this baseline lists as passing does not pass")
    p.add_argument("--write-baseline", metavar="JSON",
                   help="write the passing cases of this run as a baseline")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    import torch

    from torchneuron.ops import dtype_policy

    from . import cases, jobs, report

    dbs = cases.databases()
    if args.db:
        dbs = {k: v for k, v in dbs.items() if k in args.db}
    units = cases.enumerate_units(dbs, args.ops, args.dtypes, args.layouts)
    if not units:
        print("no OpInfo matches the selection", file=sys.stderr)
        return 2
    results = report.Results()
    started = time.monotonic()
    bar = None if args.no_progress else _progress(len(units))

    def done(unit, records, seconds):
        results.add(unit, records, seconds)
        if bar is not None:
            bar.update(1)

    def on_case(unit, case, pid):
        if bar is not None:
            bar.set_postfix_str(f"{unit.label} {unit.dtype} case {case}", refresh=False)

    try:
        jobs.run_units(units, max(1, args.jobs), tuple(args.variants), args.case_timeout,
                          done, on_case)
    finally:
        if bar is not None:
            bar.close()
    meta = {
        "torch": torch.__version__,
        "float64_policy": dtype_policy.get(),
        "databases": sorted(dbs),
        "dtypes": args.dtypes or list(DTYPE_NAMES),
        "layouts": args.layouts or list(LAYOUTS),
        "variants": list(args.variants),
        "jobs": args.jobs,
        "duration_s": round(time.monotonic() - started, 1),
        "command": "torchneuron compat ops " + " ".join(
            sys.argv[sys.argv.index("ops") + 1:] if "ops" in sys.argv else []),
    }
    json_path, md_path = report.write(results, meta, args.out)
    t = results.totals()
    print(f"{t['cases']} cases: {t['passed']} passed, {t['failed']} failed, "
          f"{t['skipped_by_policy']} skipped by the float64 policy, {t['cpu_rejects']} rejected "
          f"by the CPU too; pass rate {100 * t['pass_rate']:.2f}%; {t['process_crashes']} process "
          f"crashes. Report: {md_path}, {json_path}")
    status = 0
    for unit, rec in results.crashes():
        # No op may end the process: each crash fails the run (the report is written first).
        print(f"CRASH {unit.label} {unit.dtype} sample {rec['sample']} ({rec['variant']}): "
              f"{rec.get('input', '')}: {rec['message']}", file=sys.stderr)
        status = 1
    statuses = results.statuses()
    if args.write_baseline:
        write_baseline(args.write_baseline, statuses, args)
    if args.baseline:
        regressions = find_regressions(args.baseline, statuses)
        for key in regressions[:50]:
            print(f"REGRESSION {key}: {statuses.get(key, 'not run')}", file=sys.stderr)
        if regressions:
            print(f"{len(regressions)} cases that pass in {args.baseline} do not pass now",
                  file=sys.stderr)
            return 1
    return status


def _progress(total: int):
    from tqdm import tqdm

    return tqdm(total=total, unit="op·dtype", dynamic_ncols=True, file=sys.stderr)


def write_baseline(path: str, statuses: dict[str, str], args: argparse.Namespace) -> None:
    passing = sorted(k for k, s in statuses.items() if s == "pass")
    with open(path, "w") as f:
        json.dump({"ops": args.ops, "dtypes": args.dtypes, "db": args.db, "layouts": args.layouts,
                   "variants": args.variants, "passing": passing}, f, indent=0)
        f.write("\n")


def find_regressions(path: str, statuses: dict[str, str]) -> list[str]:
    with open(path) as f:
        passing = json.load(f)["passing"]
    return [k for k in passing if statuses.get(k) != "pass"]
