"""What PyTorch's flight recorder costs per collective on the neuron backend, in microseconds.

The recorder is on by default (TORCH_FR_BUFFER_SIZE=2000): gloo records each collective in
c10d's ring buffer, and the backend notes the collective a rank waits in during the agreement
check (torchneuron/distributed/flight_recorder.py). Both read the setting once per process, so
each run starts fresh processes on 127.0.0.1 with the recorder on or off, alternating (on, off,
off, on, ...: neither setting always goes first). Each run times a small all_reduce (16 floats,
where a per-call cost shows most) on neuron tensors, and the same on CPU tensors through plain
gloo (the native CPU baseline: PyTorch's own recorder on gloo). By default one process: a
collective between processes on a loaded 2-core machine varies by milliseconds from run to
run, which hides a cost of microseconds (`--processes 2` measures that way all the same). The
backend's own note per checked collective (made only between several ranks) is timed apart, in
one process, over many calls.
A run's figure is its least disturbed tenth of the calls (other processes only add time).
Reported: the median over runs of microseconds per call for each setting, the difference, its
spread (the difference of each on/off pair), and neuron's time over the CPU's.

Run: `.venv/bin/python benchmarks/flight_recorder_cost.py [--runs 5] [--calls 2000]
[--processes 1]`.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import socket
import sys

import torch
import torch.distributed as dist
from timing import finish_for, median, seconds_per_call, settings

WORLD = 1  # --processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank: int, port: int, calls: int, queue) -> None:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // WORLD))
    torch.neuron.set_device(rank)
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    device = torch.device("neuron", rank)
    result = {}
    for name, tensor, group in (("neuron", torch.ones(16, device=device), None),
                                ("cpu", torch.ones(16), gloo)):
        def call(t=tensor, g=group):
            dist.all_reduce(t, group=g)
        for _ in range(200):  # the group's first calls set up its channel and caches
            call()
        dist.barrier()
        # The least disturbed of 10 batches: other processes on the machine only add time.
        result[name] = min(seconds_per_call(call, max(1, calls // 10),
                                            finish=finish_for(tensor.device))
                           for _ in range(10)) * 1e6
    if rank == 0:
        result["settings"] = settings()
        result["note"] = note_cost()
        queue.put(result)
    dist.barrier()
    dist.destroy_process_group()


def note_cost() -> float:
    """Microseconds of the backend's own bookkeeping per checked collective (the note of the
    collective a rank waits in, and its removal), median of 5 batches of 20,000."""
    from torchneuron.distributed import flight_recorder

    args = (torch.ones(16),)

    def note():
        flight_recorder.waiting("allreduce_", args, "0")
        flight_recorder.done_waiting("0")
    return median([seconds_per_call(note, 20000) for _ in range(5)]) * 1e6


def one_run(buffer_size: str, calls: int) -> dict:
    os.environ["TORCH_FR_BUFFER_SIZE"] = buffer_size  # the spawned processes inherit it
    ctx = mp.get_context("spawn")
    queue, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=worker, args=(r, port, calls, queue)) for r in range(WORLD)]
    for p in procs:
        p.start()
    result = queue.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per setting (at least 5)")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per run")
    parser.add_argument("--processes", type=int, default=1, help="ranks (1 or 2)")
    parser.add_argument("--markdown", action="store_true",
                        help="settings and table in Markdown (benchmarks/run_all.py)")
    args = parser.parse_args()
    if args.runs < 5:
        parser.error(f"--runs must be at least 5 (a median of fewer says little), got {args.runs}")
    if args.processes not in (1, 2):
        parser.error(f"--processes must be 1 or 2, got {args.processes}")
    global WORLD
    WORLD = args.processes
    on: list[dict] = []
    off: list[dict] = []
    for i in range(args.runs):
        order = (("2000", on), ("0", off)) if i % 2 == 0 else (("0", off), ("2000", on))
        for size, runs in order:
            runs.append(one_run(size, args.calls))
            if not args.markdown:
                print(f"run {i + 1}/{args.runs} recorder {'on ' if size != '0' else 'off'}: "
                      f"neuron {runs[-1]['neuron']:.1f} us, cpu {runs[-1]['cpu']:.1f} us",
                      flush=True)
    rows = []
    for name in ("neuron", "cpu"):
        diffs = sorted(a[name] - b[name] for a, b in zip(on, off))
        m_on, m_off = median([r[name] for r in on]), median([r[name] for r in off])
        rows.append((name, m_on, m_off, m_on - m_off, diffs[0], diffs[-1]))
    ratio = median([r["neuron"] / r["cpu"] for r in on])
    note = median([r["note"] for r in on])
    head = (f"all_reduce of 16 floats, {WORLD} process(es), {args.calls} calls per run, "
            f"{args.runs} runs per setting; {on[-1]['settings']}")
    if args.markdown:
        print(head + "\n")
        print("| tensors | recorder on (us/call) | off (us/call) | cost (us/call) | "
              "cost per run pair, min .. max (us) |")
        print("|---|---|---|---|---|")
        for name, m_on, m_off, cost, lo, hi in rows:
            label = "neuron (neuron backend)" if name == "neuron" else "CPU (gloo)"
            print(f"| {label} | {m_on:.1f} | {m_off:.1f} | {cost:.1f} | {lo:.1f} .. {hi:.1f} |")
        print(f"\nneuron / CPU with the recorder on (median of per-run ratios): {ratio:.2f}x; "
              f"the backend's note of a checked collective: {note:.2f} us")
        return
    print("\n" + head)
    print(f"{'':8} {'on (us)':>9} {'off (us)':>9} {'cost (us)':>10} {'cost spread (us)':>22}")
    for name, m_on, m_off, cost, lo, hi in rows:
        print(f"{name:8} {m_on:9.1f} {m_off:9.1f} {cost:10.1f} {lo:10.1f} .. {hi:.1f}")
    print(f"neuron / cpu with the recorder on (median of per-run ratios): {ratio:.2f}x")
    print(f"the backend's note of a checked collective (recorder on): {note:.2f} us")

if __name__ == "__main__":
    sys.exit(main())
