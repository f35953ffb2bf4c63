"""Collective bandwidth of the c10d backend `neuron` against gloo on CPU tensors, same run.

Two processes on 127.0.0.1 join one `neuron` process group and one plain gloo group. For every
size, all_reduce and all_gather run on neuron tensors (neuron backend) and on CPU tensors (gloo),
interleaved round by round so both see the same machine load (the machine may be shared).
Bus bandwidth follows nccl-tests: all_reduce moves 2(n-1)/n of the buffer per rank, all_gather
(n-1)/n of the gathered output. Then a DDP training step: its time over the same step in a single
process, for neuron/neuron and for CPU/gloo. Target: from 1 MiB up, neuron's bandwidth at least
0.9x gloo's; `NEURON_DIST_CHECK=0` measures without the ranks' shape check. A neuron batch ends
with torch.neuron.synchronize (queued work counts, in every eager mode), the optimizer runs its
per-tensor loop (`foreach=False`) on both backends, and each process keeps freed memory
(benchmarks/timing.py's keep_freed_memory).
Run: `.venv/bin/python benchmarks/collectives.py [--rounds 9] [--quick]` (`--quick`: sizes up
to 16 MiB).
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
from timing import finish_for, keep_freed_memory, median, seconds_per_call, settings

WORLD = 2
KiB, MiB = 1 << 10, 1 << 20
SIZES = [4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def calls_for(nbytes: int) -> int:
    """Enough calls per round that a round is not all launch noise, few for big buffers."""
    return max(2, min(200, (64 * MiB) // nbytes))


def threads() -> int:
    """One intra-op thread per process per core, as torchrun sets OMP_NUM_THREADS: with two
    processes of two threads each on two cores, OpenMP's waiting threads take the core from the
    other process and a DDP step's time swings by 2x from round to round."""
    return max(1, (os.cpu_count() or 1) // WORLD)


def time_calls(fn, calls: int, group, device: torch.device) -> float:
    """Seconds per call of `calls` calls of `fn` on `device`, the ranks started together (the
    slower rank sets the pace anyway), the clock stopped once the device ran them."""
    dist.barrier(group=group)
    return seconds_per_call(fn, calls, finish=finish_for(device), keep_results=True)


def bus_bandwidth(rounds: int, sizes: list[int], neuron_group, gloo_group) -> list[tuple]:
    """Per size and collective: best bandwidth of each backend, and the median over rounds of
    the per-round ratio (each round times both back to back, in alternating order, so that
    load from other processes on the machine hits both alike)."""
    rows = []
    device = torch.device("neuron", torch.neuron.current_device())
    for nbytes in sizes:
        n = nbytes // 4
        bufs, groups = {}, {"neuron": neuron_group, "gloo": gloo_group}
        for kind, dev in (("neuron", device), ("gloo", torch.device("cpu"))):
            bufs[kind] = (torch.ones(n, device=dev),
                          torch.ones(n // WORLD, device=dev), torch.empty(n, device=dev))
        calls = calls_for(nbytes)
        for coll, factor in (("all_reduce", 2 * (WORLD - 1) / WORLD),
                             ("all_gather", (WORLD - 1) / WORLD)):
            fns = {}
            for kind, group in groups.items():
                full, part, out = bufs[kind]
                fns[kind] = ((lambda f=full, g=group: dist.all_reduce(f, group=g))
                             if coll == "all_reduce" else
                             (lambda o=out, p=part, g=group:
                              dist.all_gather_into_tensor(o, p, group=g)))
                fns[kind]()  # warm-up: gloo sets up buffers for a new size on first use
            best = {"neuron": float("inf"), "gloo": float("inf")}
            ratios = []
            for i in range(rounds):
                t = {}
                for kind in (("neuron", "gloo") if i % 2 == 0 else ("gloo", "neuron")):
                    t[kind] = time_calls(fns[kind], calls, groups[kind], bufs[kind][0].device)
                    best[kind] = min(best[kind], t[kind])
                ratios.append(t["gloo"] / t["neuron"])
            bw = {k: nbytes * factor / best[k] / 1e9 for k in best}
            rows.append((coll, nbytes, bw["neuron"], bw["gloo"], median(ratios)))
        del bufs
    return rows


def ddp_step_overhead(rounds: int, neuron_group, gloo_group) -> dict[str, tuple[float, float]]:
    """Median seconds per training step in one process and under DDP, for both backends;
    the four are timed in turn within each round."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    steps = {}
    device = torch.device("neuron", torch.neuron.current_device())
    for kind, dev, group in (("neuron", device, neuron_group),
                             ("gloo", torch.device("cpu"), gloo_group)):
        def make():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                       torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                       torch.nn.Linear(1024, 10)).to(dev)
        x, y = torch.randn(64, 512, device=dev), torch.randint(0, 10, (64,), device=dev)
        for name, model in (("single", make()), ("ddp", DDP(make(), process_group=group))):
            # foreach=False on both: PyTorch's default is foreach on PrivateUse1, a loop on CPU.
            opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=False)
            def step(model=model, opt=opt, x=x, y=y):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                return loss.detach()
            step()
            steps[(kind, name)] = (step, group, dev)
    times = {key: [] for key in steps}
    for _ in range(rounds):
        for key, (step, group, dev) in steps.items():
            times[key].append(time_calls(step, 10, group, dev))
    return {kind: (median(times[(kind, "single")]), median(times[(kind, "ddp")]))
            for kind in ("neuron", "gloo")}


def worker(rank: int, port: int, args, queue) -> None:
    torch.set_num_threads(threads())
    torch.neuron.set_device(rank)
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(minutes=10))
    gloo = dist.new_group(backend="gloo")
    sizes = [s for s in SIZES if not args.quick or s <= 16 * MiB]
    rows = bus_bandwidth(args.rounds, sizes, dist.group.WORLD, gloo)
    ddp = ddp_step_overhead(args.rounds, dist.group.WORLD, gloo)
    if rank == 0:
        queue.put((rows, ddp))
    dist.destroy_process_group()


def agreement_enabled() -> bool:
    from torchneuron.distributed import agreement

    return agreement.is_enabled()


def human(nbytes: int) -> str:
    return f"{nbytes // MiB} MiB" if nbytes >= MiB else f"{nbytes // KiB} KiB"


def main() -> None:
    keep_freed_memory()  # the ranks inherit it: gloo's CPU tensors as neuron's cached blocks
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="sizes up to 16 MiB only")
    parser.add_argument("--markdown", action="store_true",
                        help="settings as a sentence, then Markdown tables (for docs/performance.md)")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    queue, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=worker, args=(r, port, args, queue)) for r in range(WORLD)]
    for p in procs:
        p.start()
    rows, ddp = queue.get(timeout=3600)
    for p in procs:
        p.join(timeout=60)
    if any(p.exitcode != 0 for p in procs):
        sys.exit("a benchmark process failed")

    check = "on" if agreement_enabled() else "off (NEURON_DIST_CHECK=0)"
    print((markdown_report if args.markdown else text_report)(args.rounds, check, rows, ddp))


def text_report(rounds: int, check: str, rows, ddp) -> str:
    lines = [f"{settings(threads())} at the end",
             f"bus bandwidth, {WORLD} processes on 127.0.0.1, {os.cpu_count()} CPU cores, best of "
             f"{rounds} rounds (GB/s); ratio = median over rounds of neuron/gloo; "
             f"shape check {check}",
             f"{'collective':<12}{'size':>9}{'neuron':>10}{'gloo cpu':>10}{'ratio':>8}"]
    for coll, nbytes, bw_n, bw_g, ratio in rows:
        lines.append(f"{coll:<12}{human(nbytes):>9}{bw_n:>10.3f}{bw_g:>10.3f}{ratio:>7.2f}x"
                     f"{below_target(nbytes, ratio)}")
    lines += ["", "DDP training step (MLP 512-1024-1024-10, batch 64), median ms per step",
              f"{'backend':<10}{'1 process':>11}{'DDP x2':>9}{'overhead':>10}"]
    for kind, (single, ddp_t) in ddp.items():
        lines.append(f"{kind:<10}{single * 1e3:>11.2f}{ddp_t * 1e3:>9.2f}"
                     f"{(ddp_t - single) * 1e3:>10.2f}")
    lines.append(f"neuron DDP overhead / gloo DDP overhead: {ddp_overhead_ratio(ddp):.2f}x")
    return "\n".join(lines)


def markdown_report(rounds: int, check: str, rows, ddp) -> str:
    lines = [f"{WORLD} processes on 127.0.0.1, {os.cpu_count()} CPU cores, "
             f"{settings(threads())} at the end (per process), best of {rounds} rounds, shape "
             f"check {check}. Bus bandwidth in GB/s; ratio = median over "
             "rounds of neuron/gloo (target from 1 MiB up: >= 0.9x).", "",
             "| collective | size | neuron | gloo on CPU | ratio |", "|---|---:|---:|---:|---:|"]
    for coll, nbytes, bw_n, bw_g, ratio in rows:
        lines.append(f"| {coll} | {human(nbytes)} | {bw_n:.3f} | {bw_g:.3f} | {ratio:.2f}x"
                     f"{below_target(nbytes, ratio)} |")
    lines += ["", "DDP training step (MLP 512-1024-1024-10, batch 64), median ms per step:", "",
              "| backend | 1 process | DDP x2 | overhead |", "|---|---:|---:|---:|"]
    for kind, (single, ddp_t) in ddp.items():
        lines.append(f"| {kind} | {single * 1e3:.2f} | {ddp_t * 1e3:.2f} | "
                     f"{(ddp_t - single) * 1e3:.2f} |")
    lines += ["", f"neuron DDP overhead / gloo DDP overhead: {ddp_overhead_ratio(ddp):.2f}x"]
    return "\n".join(lines)


def below_target(nbytes: int, ratio: float) -> str:
    return "" if nbytes < MiB or ratio >= 0.9 else "  < 0.9x"


def ddp_overhead_ratio(ddp) -> float:
    return (ddp["neuron"][1] - ddp["neuron"][0]) / (ddp["gloo"][1] - ddp["gloo"][0])


if __name__ == "__main__":
    main()
