"""`torchneuron compat vision`: torchvision's model builders (vision/models.py), ops
(vision/ops.py) and transforms v2 (vision/transforms.py), neuron against the CPU. The report
states the battery's time and its throughput in model builders per minute."""

from __future__ import annotations

import argparse

STAGES = ("forward", "backward")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", nargs="*", default=None, metavar="NAME",
                   help="case names to run (shell patterns, e.g. 'resnet*' or 'ops.*'); default all")


def requirement_error() -> str | None:
    """Why the battery cannot run in this environment, or None."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        return ("the vision battery needs torchvision, which installs beside torch 2.14.1: run it "
                "in .venv-214 (`make setup-214`, then `.venv-214/bin/torchneuron compat vision`)")
    return None


def run(args: argparse.Namespace) -> int:
    from ..staged import print_summary, quiet, run_battery, select
    from . import models, ops, transforms

    problem = requirement_error()
    if problem:
        raise SystemExit(problem)
    quiet()
    doc = run_battery("vision", select(models.cases() + ops.cases() + transforms.cases(), args.only),
                      STAGES, args.out)
    return print_summary(doc)
