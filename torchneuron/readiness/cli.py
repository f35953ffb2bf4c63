"""`torchneuron readiness script.py [args]`: runs the script unchanged in a child process
(child.py) with the accounting on, lets its output and the step progress through, then prints
the report's summary and where the JSON and HTML went. Exit status: the script's own when it
failed (1 when it raised), 2 for a script that does not exist, 3 for a script that never used
the neuron device (there is nothing to report), else 0."""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys

HELP = "run a script on the software NeuronCore and report what would happen on Trainium"
NO_SCRIPT, NEVER_ON_NEURON = 2, 3


def add_subcommand(subparsers) -> None:
    parser = subparsers.add_parser("readiness", help=HELP, description=HELP)
    parser.add_argument("--out", default="readiness",
                        help="folder for report.json and report.html (default ./readiness)")
    parser.add_argument("--compare", metavar="OLD.json", default=None,
                        help="a report of an earlier run: its regressions are listed first")
    parser.add_argument("--nproc-per-node", type=int, default=1, metavar="N",
                        help="run N processes through torchrun: a report per rank and a merged one")
    parser.add_argument("script", help="the Python script to run, unchanged")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    parser.set_defaults(run=run)


def _load(path: str, what: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        print(f"torchneuron readiness: cannot read {what} {path}: {exc}", file=sys.stderr)
        return None


def _merge_ranks(out: str, report_path: str) -> None:
    """Writes the merged report.json and report.html from the ranks' reports, if any."""
    from .child import write
    from .report import merge

    paths = sorted(glob.glob(os.path.join(out, "report.rank*.json"))
                   + glob.glob(os.path.join(out, "report.pid*.json")))
    reports = [r for r in (_load(p, "a rank's report") for p in paths) if r is not None]
    if reports:
        write(merge(reports), out)
        print(f"torchneuron readiness: merged {len(reports)} ranks' reports: "
              + ", ".join(os.path.basename(p) for p in paths), file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from .report import compare, format_compare, format_report

    if not os.path.isfile(args.script):
        print(f"torchneuron readiness: no such script: {args.script}", file=sys.stderr)
        return NO_SCRIPT
    old = None
    if args.compare is not None:
        old = _load(args.compare, "the report to compare with")
        if old is None:
            return NO_SCRIPT
    if args.nproc_per_node < 1:
        print(f"torchneuron readiness: --nproc-per-node {args.nproc_per_node}: must be at "
              "least 1", file=sys.stderr)
        return NO_SCRIPT
    report_path = os.path.join(args.out, "report.json")
    for stale in [*glob.glob(report_path), *glob.glob(os.path.join(args.out, "report.r*.json")),
                  *glob.glob(os.path.join(args.out, "report.p*.json"))]:
        os.remove(stale)  # a report left by an earlier run must not pass for this one's
    child_args = [args.out, args.script, *args.args]
    if args.nproc_per_node == 1:
        command = [sys.executable, "-m", "torchneuron.readiness.child", *child_args]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={args.nproc_per_node}", "-m",
                   "torchneuron.readiness.child", args.out, "--per-rank", *child_args[1:]]
    child = subprocess.run(command)
    if args.nproc_per_node > 1:
        _merge_ranks(args.out, report_path)
    report = _load(report_path, "the report") if os.path.exists(report_path) else None
    if report is None:
        print(f"torchneuron readiness: the script's process ended (exit {child.returncode}) "
              "before it wrote a report", file=sys.stderr)
        return child.returncode or 1
    if old is not None:
        print(format_compare(compare(old, report)))
    print(format_report(report))
    print(f"report: {report_path} and {os.path.join(args.out, 'report.html')}")
    if child.returncode:
        return child.returncode
    return 0 if report["touched_neuron"] else NEVER_ON_NEURON
