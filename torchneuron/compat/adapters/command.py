"""`torchneuron compat peft`: every case of adapters/cases.py."""

from __future__ import annotations

import argparse

STAGES = ("train", "merge")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", nargs="*", default=None, metavar="NAME",
                   help="case names to run (shell patterns, e.g. 'lora*'); default all")


def run(args: argparse.Namespace) -> int:
    from ..staged import print_summary, quiet, run_battery, select
    from .cases import cases

    quiet()
    return print_summary(run_battery("peft", select(cases(), args.only), STAGES, args.out))
