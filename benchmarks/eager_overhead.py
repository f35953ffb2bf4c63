"""Eager overhead of the neuron device against native CPU PyTorch on the same machine.

Each case runs on neuron and on CPU in the same process, interleaved, best of several rounds;
the ratio neuron/CPU is the overhead torchneuron adds (every neuron kernel is a CPU kernel).
Run: `.venv/bin/python benchmarks/eager_overhead.py` (or `make bench`).
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import torch


def best_time(fn: Callable[[], object], number: int) -> float:
    """Seconds per call: the best of the repeats, each `number` calls long."""
    fn()  # warm-up (first-call initialisation, caches)
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def small_op_cases(device: str) -> dict[str, tuple[Callable[[], object], int]]:
    a16 = torch.randn(16, device=device)
    m64 = torch.randn(64, 64, device=device)
    lin = torch.nn.Linear(16, 16).to(device)
    x16 = torch.randn(8, 16, device=device)
    view_base = torch.randn(64, 64, device=device)
    scalar = torch.randn((), device=device)
    host = torch.randn(1024)  # 4 KiB

    def linear_fwd_bwd():
        lin(x16).sum().backward()

    return {
        "add 16 floats": (lambda: a16 + a16, 2000),
        "matmul 64x64": (lambda: m64 @ m64, 1000),
        "Linear(16,16) fwd+bwd": (linear_fwd_bwd, 300),
        "in-place on a view": (lambda: view_base[:, 3].add_(1.0), 2000),
        ".item()": (lambda: scalar.item(), 2000),
        "cpu->device copy 4 KiB": (lambda: host.to(device), 2000),
    }


def measure(rounds: int) -> list[tuple[str, float, float]]:
    neuron, cpu = small_op_cases("neuron"), small_op_cases("cpu")
    rows = []
    for name in neuron:
        fn_n, number = neuron[name]
        fn_c, _ = cpu[name]
        t_n, t_c = float("inf"), float("inf")
        for _ in range(rounds):  # interleaved, so both see the same machine load
            t_n = min(t_n, best_time(fn_n, number))
            t_c = min(t_c, best_time(fn_c, number))
        rows.append((name, t_n, t_c))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="intra-op threads for both sides (1 is steadier on a busy machine)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = measure(args.rounds)
    print(f"{'case':<26} {'neuron us':>10} {'cpu us':>10} {'neuron/cpu':>11}")
    for name, t_n, t_c in rows:
        print(f"{name:<26} {t_n * 1e6:>10.2f} {t_c * 1e6:>10.2f} {t_n / t_c:>10.2f}x")


if __name__ == "__main__":
    main()
