"""What PyTorch's flight recorder costs per collective on the neuron backend, in microseconds.

The recorder is on by default (TORCH_FR_BUFFER_SIZE=2000): gloo records each collective in
c10d's ring buffer, and the backend notes the collective a rank waits in during the agreement
check (torchneuron/distributed/flight_recorder.py). Both read the setting once per process, so
each run starts a fresh pair of processes on 127.0.0.1, with the recorder on or off, alternating
(on, off, off, on, ...: neither setting always goes first). Each run times a small all_reduce
(16 floats, the case where the per-call cost shows most) on neuron tensors, and the same on CPU
tensors through plain gloo (the native CPU baseline: PyTorch's own recorder cost on gloo).
Reported: the median over runs of microseconds per call for each setting, the difference, its
spread (the difference of each on/off pair), and neuron's time over the CPU's.

Run: `.venv/bin/python benchmarks/flight_recorder_cost.py [--runs 5] [--calls 2000]`.
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

WORLD = 2


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
        result[name] = seconds_per_call(call, calls, finish=finish_for(tensor.device)) * 1e6
    if rank == 0:
        result["settings"] = settings()
        queue.put(result)
    dist.barrier()
    dist.destroy_process_group()


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
    args = parser.parse_args()
    on: list[dict] = []
    off: list[dict] = []
    for i in range(args.runs):
        order = (("2000", on), ("0", off)) if i % 2 == 0 else (("0", off), ("2000", on))
        for size, runs in order:
            runs.append(one_run(size, args.calls))
            print(f"run {i + 1}/{args.runs} recorder {'on ' if size != '0' else 'off'}: "
                  f"neuron {runs[-1]['neuron']:.1f} us, cpu {runs[-1]['cpu']:.1f} us",
                  flush=True)
    print(f"\nall_reduce of 16 floats over {WORLD} processes, {args.calls} calls per run, "
          f"{args.runs} runs per setting; {on[-1]['settings']}")
    print(f"{'':8} {'on (us)':>9} {'off (us)':>9} {'cost (us)':>10} {'cost spread (us)':>22}")
    for name in ("neuron", "cpu"):
        diffs = sorted(a[name] - b[name] for a, b in zip(on, off))
        m_on, m_off = median([r[name] for r in on]), median([r[name] for r in off])
        print(f"{name:8} {m_on:9.1f} {m_off:9.1f} {m_on - m_off:10.1f} "
              f"{diffs[0]:10.1f} .. {diffs[-1]:.1f}")
    ratio = median([r["neuron"] / r["cpu"] for r in on])
    print(f"neuron / cpu with the recorder on (median of per-run ratios): {ratio:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
