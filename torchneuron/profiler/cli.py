"""`torchneuron estimate SCRIPT [args]`: runs a script under torch.profiler with the neuron
device's activities and prints the estimated Trainium time of everything it ran on neuron."""

from __future__ import annotations

import argparse
import runpy
import sys

HELP = "run a script under torch.profiler and print its estimated Trainium time"


def add_subcommand(subparsers) -> None:
    parser = subparsers.add_parser("estimate", help=HELP, description=HELP)
    parser.add_argument("--top", type=int, default=10, help="ops listed (default 10)")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from . import summary

    saved_argv = sys.argv
    sys.argv = [args.script, *args.args]
    status = 0
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            try:
                runpy.run_path(args.script, run_name="__main__")
            except SystemExit as e:  # the script's own exit status, after the summary
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            torch.neuron.synchronize()
    finally:
        sys.argv = saved_argv
    print(summary(top=args.top))
    return status
