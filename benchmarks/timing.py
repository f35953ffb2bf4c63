"""How every benchmark here times a call, written once so that their figures stay comparable:
seconds per call over a batch of back-to-back calls, the best of interleaved rounds, medians;
the device's finish that ends a neuron batch; the CPU baseline's allocator setting; the settings
line every benchmark prints."""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Hashable, Mapping, TypeVar

Key = TypeVar("Key", bound=Hashable)


def seconds_per_call(fn: Callable[[], object], number: int, clock=time.perf_counter,
                     warmup: bool = False, finish: Callable[[], object] | None = None,
                     keep_results: bool = False) -> float:
    """Seconds per call of `number` back-to-back calls of `fn`, read on `clock`. With `warmup`,
    one untimed call first (first-call initialisation, caches). `finish` runs before the clock
    is read (and after the warm-up): a device's synchronize, so that queued work counts. With
    `keep_results`, every call's return value is held until the clock has been read, as a
    program holds what it computes: a mode that defers work may skip computing a result that
    nothing holds, and a benchmark that drops its results would time less work on that side."""
    if warmup:
        fn()
    if finish is not None:
        finish()
    kept: list[object] = []
    start = clock()
    for _ in range(number):
        result = fn()
        if keep_results:
            kept.append(result)
        del result
    if finish is not None:
        finish()
    seconds = (clock() - start) / number
    kept.clear()  # released outside the timed window
    return seconds


def best_interleaved(fns: Mapping[Key, Callable[[], object]], number: int, rounds: int,
                     clock=time.perf_counter, warmup: bool = False,
                     finish: Mapping[Key, Callable[[], object]] | None = None,
                     keep_results: bool = False) -> dict[Key, float]:
    """The best seconds per call of each of `fns` over `rounds` rounds. Each round times every
    function once, in the mapping's order, so that all of them see the same machine load (the
    machine may be shared); the best round is the one least disturbed. `finish[key]`, where
    given, ends each timed batch of that function; `keep_results` as in seconds_per_call."""
    best = {key: float("inf") for key in fns}
    finish = finish or {}
    for _ in range(rounds):
        for key, fn in fns.items():
            best[key] = min(best[key], seconds_per_call(fn, number, clock, warmup,
                                                        finish.get(key), keep_results))
    return best


def median(xs: list[float]) -> float:
    """The middle value (the upper one of an even count), robust to a round that a neighbour
    process disturbed."""
    xs = sorted(xs)
    return xs[len(xs) // 2]


def finish_for(device) -> Callable[[], object] | None:
    """What ends a timed batch on `device`: on neuron, torch.neuron.synchronize, so that the
    clock stops only after the device ran what the batch queued (in every eager mode); on the
    CPU nothing, its calls return when their work is done."""
    import torch

    if torch.device(device).type == "neuron":
        return torch.neuron.synchronize
    return None


# glibc keeps freed memory: allocations below the mmap threshold come from the heap, and the heap
# is not trimmed below this much free memory (4 GiB, above any tensor a benchmark makes). glibc
# reads them at process start; mallopt() later in the process left a 64 MiB op page-faulting on
# some calls.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(1 << 32), "MALLOC_TRIM_THRESHOLD_": str(1 << 32)}


def keep_freed_memory() -> None:
    """Makes this process run with glibc told to keep freed memory, as a caching allocator does:
    without it the CPU baseline pays an mmap and a page fault per 4 KiB on every large tensor it
    allocates (a 64 MiB pointwise op: ~16k faults per call, none with it) while neuron's caching
    allocator reuses its blocks, and a benchmark would count the allocator as neuron's win. A
    process started without KEEP_FREED_MEMORY in its environment is started again with it
    (os.execv, same interpreter and arguments), so call this first in main(); the processes it
    starts inherit it. Neuron's device memory is its own allocator's, so a process that runs
    both sides gives the setting to the CPU's tensors only."""
    if all(os.environ.get(name) == value for name, value in KEEP_FREED_MEMORY.items()):
        return
    os.environ.update(KEEP_FREED_MEMORY)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def settings(threads: int | None = None) -> str:
    """The settings a figure depends on, for a benchmark's output: torch's version, the eager
    mode neuron ran in, the intra-op threads and the machine's load average (1, 5, 15 min)."""
    import torch

    import torchneuron

    threads = torch.get_num_threads() if threads is None else threads
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"torch {torch.__version__}, NEURON_EAGER_MODE={torchneuron.runtime.execution.mode()}, "
            f"{threads} intra-op threads, load average {load}")


def print_table(line: str, header: tuple[str, ...], rows: list[tuple[str, ...]], markdown: bool,
                widths: tuple[int, int] = (34, 12)) -> None:
    """A benchmark's settings line and table: Markdown (for docs/performance.md) or aligned text
    (the first column `widths[0]` wide, the others `widths[1]`)."""
    if markdown:
        print(f"{line}.\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        print(line)
        for row in (header, *rows):
            print(f"{row[0]:<{widths[0]}} " + " ".join(f"{x:>{widths[1]}}" for x in row[1:]))


def standard_arguments(doc: str, rounds: int = 7):
    """The arguments most benchmarks take (--rounds, --threads, --markdown), parsed, with the
    intra-op thread count applied and the CPU baseline's allocator setting made first."""
    import argparse

    import torch

    keep_freed_memory()
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--markdown", action="store_true",
                        help="print the settings and a Markdown table (for docs/performance.md)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    return args
