"""`torchneuron compat sentence-transformers`: every case of sentences/cases.py."""

from __future__ import annotations

import argparse

STAGES = ("encode", "fit")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", nargs="*", default=None, metavar="NAME",
                   help="case names to run (shell patterns); default all")


def run(args: argparse.Namespace) -> int:
    from ..staged import print_summary, quiet, run_battery, select
    from .cases import cases

    quiet()
    return print_summary(run_battery("sentence-transformers", select(cases(), args.only), STAGES,
                                     args.out))
