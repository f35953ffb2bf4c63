"""`torchneuron compat all` (`make compat-all`): every battery (ops, models, diffusers, PEFT,
sentence-transformers, and torchvision's and timm's, which run in the interpreter of
--vision-python where this environment lacks torchvision; so do the model types that need timm,
after the model battery) into one dated folder under --runs, then the HTML report of that run and
its comparison with the previous run in --runs (or the run named by --compare): regressions
first, then new passes, then unchanged. Exit code 1 when anything regressed, else 0."""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import os
import subprocess
import sys

from .outcomes import BATTERIES

# Batteries whose library installs beside torch 2.14.1 only, and the module each needs.
VISION = {"vision": "torchvision", "timm": "timm"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", default="reports/runs",
                   help="folder of dated run folders (default reports/runs)")
    p.add_argument("--html", default="reports/compat.html",
                   help="where the latest run's HTML page is also copied (default reports/compat.html)")
    p.add_argument("--compare", metavar="RUN_FOLDER",
                   help="compare with this run instead of the latest one in --runs")
    p.add_argument("--batteries", nargs="+", choices=BATTERIES, default=list(BATTERIES),
                   help="only these batteries (default all)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes for the op and model batteries (default: one per CPU)")
    p.add_argument("--vision-python", metavar="PYTHON",
                   help="interpreter of the environment with torchvision and timm (.venv-214's), "
                        "which runs the vision and timm batteries when this one lacks them")
    p.add_argument("--models", nargs="*", default=None, metavar="PATTERN",
                   help="only these model types in the model battery (default all)")


def battery_arguments(battery: str, out: str, args: argparse.Namespace) -> argparse.Namespace:
    """The battery's own command-line defaults, with the run folder and what `all` passes on."""
    from .cli import BATTERIES as COMMANDS

    module = importlib.import_module(COMMANDS[battery][0])
    parser = argparse.ArgumentParser(prog=f"torchneuron compat {battery}")
    parser.add_argument("--out")
    module.add_arguments(parser)
    argv = ["--out", out]
    if battery in ("ops", "models"):
        argv += ["--jobs", str(args.jobs)]
    if battery == "models" and args.models:
        argv += ["--only", *args.models]
    return parser.parse_args(argv)


def models_needing_timm(folder: str, args: argparse.Namespace) -> int | None:
    """After the model battery, where this environment lacks timm: the model types its report
    left untried for want of timm, run by --vision-python's interpreter (`torchneuron compat
    models --needs-timm`, merged into the run folder's report, as `make compat-models-timm`
    does). Its exit code; None where there is nothing to run here (this environment has timm,
    so the battery ran them itself; no report; no such type) or no interpreter to run it in,
    which it says."""
    import json

    from .models.report import needing_timm

    path = os.path.join(folder, "models.json")
    if importlib.util.find_spec("timm") is not None or not os.path.exists(path):
        return None
    with open(path) as f:
        types = needing_timm(json.load(f))
    if not types:
        return None
    if not getattr(args, "vision_python", None):
        print(f"models: {len(types)} model types that need timm not run, this environment "
              "lacks timm (--vision-python names one that has it)", file=sys.stderr)
        return None
    return subprocess.run([args.vision_python, "-m", "torchneuron.cli", "compat", "models",
                           "--needs-timm", "--skip-minilm", "--jobs", str(args.jobs),
                           "--out", folder]).returncode


def previous_run(runs: str, current: str) -> str | None:
    """The latest dated run folder before `current` that has at least one battery report."""
    if not os.path.isdir(runs):
        return None
    names = sorted(n for n in os.listdir(runs)
                   if os.path.join(runs, n) != current and n < os.path.basename(current))
    for name in reversed(names):
        folder = os.path.join(runs, name)
        if any(os.path.exists(os.path.join(folder, f"{b}.json")) for b in BATTERIES):
            return folder
    return None


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from . import outcomes, report_page
    from .cli import BATTERIES as COMMANDS

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    folder = os.path.join(args.runs, stamp)
    os.makedirs(folder, exist_ok=True)
    bar = tqdm(args.batteries, unit="battery", file=sys.stderr, position=0)
    failed_to_run = []
    for battery in bar:
        bar.set_description(battery)
        if battery in VISION and importlib.util.find_spec(VISION[battery]) is None:
            if not getattr(args, "vision_python", None):
                print(f"{battery}: not run, this environment lacks {VISION[battery]} "
                      f"(--vision-python names one that has it)", file=sys.stderr)
                continue
            code = subprocess.run([args.vision_python, "-m", "torchneuron.cli", "compat", battery,
                                   "--out", folder]).returncode
            if code != 0:
                failed_to_run.append(battery)
            continue
        module = importlib.import_module(COMMANDS[battery][0])
        code = module.run(battery_arguments(battery, folder, args))
        if code not in (0, None):
            failed_to_run.append(battery)
        if battery == "models" and models_needing_timm(folder, args) not in (0, None):
            failed_to_run.append("models (the types that need timm)")
    bar.close()
    page = report_page.write(folder, os.path.join(folder, "compat.html"))
    if args.html:
        import shutil

        os.makedirs(os.path.dirname(args.html) or ".", exist_ok=True)
        shutil.copy(page, args.html)
    print(f"run: {folder}; report: {page}" + (f", {args.html}" if args.html else ""))
    before = args.compare or previous_run(args.runs, folder)
    if before is None:
        print("no earlier run to compare with")
        return 1 if failed_to_run else 0
    diff = outcomes.compare(outcomes.read(before), outcomes.read(folder))
    text = outcomes.comparison_markdown(diff, before)
    with open(os.path.join(folder, "comparison.md"), "w") as f:
        f.write(text)
    print(text)
    regressed = any(d["regressions"] for d in diff.values())
    return 1 if regressed or failed_to_run else 0
