"""`torchneuron compat timm`: timm's model families (vision/timm_models.py), neuron against the
CPU, forward and backward, channels_last and bf16 autocast on a sample."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", nargs="*", default=None, metavar="NAME",
                   help="case names to run (shell patterns, e.g. 'resnet*'); default all")


def run(args: argparse.Namespace) -> int:
    import importlib.util

    from ..staged import print_summary, quiet, run_battery, select
    from . import timm_models

    if importlib.util.find_spec("timm") is None:
        raise SystemExit("the timm battery needs timm, installed beside torch 2.14.1: run it in "
                         ".venv-214 (`make setup-214`, then `.venv-214/bin/torchneuron compat timm`)")
    quiet()
    return print_summary(run_battery("timm", select(timm_models.cases(), args.only),
                                     timm_models.STAGES, args.out))
