"""`torchneuron compat diffusers`: every case of diffusion/models.py and diffusion/pipelines.py."""

from __future__ import annotations

import argparse

STAGES = ("forward", "train", "images")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", nargs="*", default=None, metavar="NAME",
                   help="case names to run (shell patterns); default all")


def cases():
    from . import models, pipelines

    return models.cases() + pipelines.cases()


def run(args: argparse.Namespace) -> int:
    from ..staged import print_summary, quiet, run_battery, select

    quiet()
    return print_summary(run_battery("diffusers", select(cases(), args.only), STAGES, args.out))
