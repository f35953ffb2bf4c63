"""The readiness accounting's cost (docs/readiness.md): the demo GPT's training step and the
small-op cases of eager_overhead.py on neuron with the accounting off and on, interleaved in one
process, against native CPU eager in the same rounds.

Targets (issue 52): on costs at most 10% of the demo's training step (ratio on/off); off costs at
most 1% (off is one relaxed atomic load per op: its ratio against the CPU is eager_overhead.py's,
compare with docs/performance.md). Every neuron batch ends with torch.neuron.synchronize() and
every call's result is held until its batch is timed (timing.py), on both sides.
Run: `.venv/bin/python benchmarks/accounting.py [--rounds 7] [--threads 1]` from the repository
root.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from eager_overhead import demo_gpt_step, small_op_cases
from timing import finish_for, keep_freed_memory, seconds_per_call, settings

from torchneuron.device import accounting


def accounted(fn, number: int, finish) -> float:
    """Seconds per call of `fn` with the accounting on for the whole batch (as in a training
    loop's later steps: every signature seen, one hash lookup per op)."""
    accounting.start()
    try:
        return seconds_per_call(fn, number, finish=finish, keep_results=True)
    finally:
        accounting.stop()


def main() -> None:
    keep_freed_memory()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    finish = finish_for("neuron")

    cases = {"GPT (demo) training step": (demo_gpt_step, 2)}
    small = small_op_cases("neuron")
    small_cpu = small_op_cases("cpu")
    print(settings(args.threads))
    print(f"{'case':<34} {'cpu ms':>9} {'off ms':>9} {'on ms':>9} {'off/cpu':>8} {'on/off':>14}")
    rows = []
    for name, (make, number) in cases.items():
        rows.append((name, make("cpu"), make("neuron"), number))
    for name, (fn, number) in small.items():
        rows.append((name, small_cpu[name][0], fn, number))
    for name, cpu_fn, neuron_fn, number in rows:
        cpu_fn()
        accounted(neuron_fn, 1, finish)  # first calls: signatures seen, caches warm
        cpu, off, on, ratios = [], [], [], []
        for _ in range(args.rounds):
            c = seconds_per_call(cpu_fn, number, keep_results=True)
            o = seconds_per_call(neuron_fn, number, finish=finish, keep_results=True)
            a = accounted(neuron_fn, number, finish)
            cpu.append(c)
            off.append(o)
            on.append(a)
            ratios.append(a / o)
        spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
        print(f"{name:<34} {min(cpu) * 1e3:9.3f} {min(off) * 1e3:9.3f} {min(on) * 1e3:9.3f} "
              f"{min(off) / min(cpu):8.2f} {statistics.median(ratios):6.3f} ({spread})")
    print(settings(args.threads))


if __name__ == "__main__":
    main()
