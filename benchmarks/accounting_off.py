"""The readiness accounting's cost while it is off (issue 52: at most 1%): the small-op cases of
eager_overhead.py and the demo GPT's training step on neuron, with this checkout's C++ core
against a second build of the same source whose `accounting::enabled()` is compiled out (a
constant false, csrc/aten/Accounting.h), so that the only difference between the two is the
check an op pays while the accounting is off.

The second build lives in its own copy of the checkout (`--variant DIR`, default
/tmp/torchneuron-accounting-off), brought up to this checkout's tracked files on every run, the
one line changed, its C++ core built as `make setup` builds it (6-7 minutes on 2 cores the first
time, then only what changed). Each round runs one process per build, their order alternating
from round to round, so both see the same load; each process times every case (best of 5
batches). Two ratios, check in over compiled out: of the best times over all rounds (the least
disturbed process of each build), and per round (median and range: how much one process's run
varies); the last row is the geometric mean of the first over the cases. A ratio above 1 is what
the check costs. Two builds of one source also differ by code layout, and a microsecond op by
which process ran it, so one small op's ratio moves a few percent either way from run to run;
the mean over the cases and the training step are the figures to hold against 1%. Every neuron
batch ends with torch.neuron.synchronize() and every call's result is held until its batch is
timed (timing.py).
Run: `.venv/bin/python benchmarks/accounting_off.py [--rounds 11] [--threads 1]` from the
repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_VARIANT = pathlib.Path("/tmp/torchneuron-accounting-off")
HEADER = "csrc/aten/Accounting.h"
CHECK = "inline bool enabled() { return g_enabled.load(std::memory_order_relaxed); }"
COMPILED_OUT = "inline constexpr bool enabled() { return false; }  // accounting_off.py's variant"


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True)
    return [name for name in out.stdout.decode().split("\0") if (ROOT / name).is_file()]


def write_if_changed(path: pathlib.Path, data: bytes, like: pathlib.Path | None = None) -> None:
    """Writes only what changed (with `like`'s times), so that the C++ build, which goes by
    file times, recompiles only what differs from the variant's last build."""
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if like is not None:
        shutil.copystat(like, path)


def make_variant(variant: pathlib.Path) -> None:
    """The variant brought up to this checkout's tracked files, the accounting's check compiled
    out, its C++ core built (incrementally, as `make setup` builds: the first time takes 6-7
    minutes on 2 cores, a rerun with unchanged C++ seconds)."""
    header = (ROOT / HEADER).read_text()
    if CHECK not in header:
        raise SystemExit(f"{HEADER} no longer has the line this benchmark compiles out:\n  {CHECK}")
    for name in tracked_files():
        if name != HEADER:
            write_if_changed(variant / name, (ROOT / name).read_bytes(), like=ROOT / name)
    write_if_changed(variant / HEADER, header.replace(CHECK, COMPILED_OUT).encode())
    print(f"building the variant's C++ core in {variant}", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=variant,
                   check=True, stdout=subprocess.DEVNULL)


def worker(threads: int) -> None:
    """One process's figures: seconds per call of each case, best of 5 batches, as JSON."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import torch
    from eager_overhead import demo_gpt_step, small_op_cases
    from timing import finish_for, seconds_per_call

    torch.set_num_threads(threads)
    finish = finish_for("neuron")
    cases = {"GPT (demo) training step": (demo_gpt_step("neuron"), 2)}
    cases.update(small_op_cases("neuron"))
    best = {}
    for name, (fn, number) in cases.items():
        fn()  # first call of the signature, caches warm
        best[name] = min(seconds_per_call(fn, number, finish=finish, keep_results=True)
                         for _ in range(5))
    import torchneuron

    print(json.dumps({"package": torchneuron.__file__, "seconds": best}))


def run_one(tree: pathlib.Path, threads: int) -> dict[str, float]:
    """One worker's figures, with `tree`'s torchneuron (the cases' code is this checkout's)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, __file__, "--worker", "--threads", str(threads)],
                         cwd=tree, env=env, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    if not pathlib.Path(result["package"]).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the worker for {tree} imported {result['package']}")
    return result["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--variant", type=pathlib.Path, default=DEFAULT_VARIANT)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.worker:
        return worker(args.threads)
    make_variant(args.variant)

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from timing import KEEP_FREED_MEMORY, print_table, settings

    os.environ.update(KEEP_FREED_MEMORY)  # the workers' allocator setting, as every benchmark's
    before = settings(args.threads)  # the workers' settings: they inherit this environment
    on_path, off_path = [], []
    for r in range(args.rounds):
        order = [(ROOT, on_path), (args.variant, off_path)]
        for tree, into in (order if r % 2 == 0 else order[::-1]):
            into.append(run_one(tree, args.threads))
    rows, ratios_of_best = [], []
    for name in on_path[0]:
        ratios = [a[name] / b[name] for a, b in zip(on_path, off_path)]
        best_in, best_out = min(a[name] for a in on_path), min(b[name] for b in off_path)
        ratios_of_best.append(best_in / best_out)
        rows.append((name, f"{best_in * 1e3:.4f}", f"{best_out * 1e3:.4f}",
                     f"{best_in / best_out:.3f}",
                     f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"))
    rows.append(("all cases (geometric mean)", "", "",
                 f"{statistics.geometric_mean(ratios_of_best):.3f}", ""))
    line = (f"Before: {before}. After: {settings(args.threads)}. {args.rounds} rounds, one "
            "process per build per round; best of the rounds per column")
    header = ("case", "check in, ms", "compiled out, ms", "ratio of the best",
              "ratio per round (median, range)")
    print_table(line, header, rows, args.markdown)


if __name__ == "__main__":
    main()
