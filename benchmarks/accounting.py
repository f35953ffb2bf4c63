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

import statistics

import torch
from eager_overhead import demo_gpt_step, small_op_cases
from timing import finish_for, print_table, seconds_per_call, settings, standard_arguments

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
    args = standard_arguments(__doc__)
    finish = finish_for("neuron")

    small = small_op_cases("neuron")
    small_cpu = small_op_cases("cpu")
    cases = [("GPT (demo) training step", demo_gpt_step("cpu"), demo_gpt_step("neuron"), 2)]
    cases += [(name, small_cpu[name][0], fn, number) for name, (fn, number) in small.items()]
    before = settings(args.threads)
    rows = []
    for name, cpu_fn, neuron_fn, number in cases:
        cpu_fn()
        accounted(neuron_fn, 1, finish)  # first calls: signatures seen, caches warm
        cpu, off, on, ratios = [], [], [], []
        for _ in range(args.rounds):
            cpu.append(seconds_per_call(cpu_fn, number, keep_results=True))
            off.append(seconds_per_call(neuron_fn, number, finish=finish, keep_results=True))
            on.append(accounted(neuron_fn, number, finish))
            ratios.append(on[-1] / off[-1])
        rows.append((name, min(cpu), min(off), min(on), statistics.median(ratios), min(ratios),
                     max(ratios)))
    header = ("case", "CPU ms", "off ms", "on ms", "off / CPU", "on / off (median, range)")
    lines = [(name, f"{c * 1e3:.3f}", f"{o * 1e3:.3f}", f"{a * 1e3:.3f}", f"{o / c:.2f}",
              f"{m:.3f} ({lo:.3f}-{hi:.3f})") for name, c, o, a, m, lo, hi in rows]
    line = (f"Before: {before}. After: {settings(args.threads)}. Best of {args.rounds} rounds "
            "per column; the ratio on/off is taken per round")
    print_table(line, header, lines, args.markdown)

if __name__ == "__main__":
    main()
