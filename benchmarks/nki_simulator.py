"""Speed of the NKI simulator (the software NeuronCore running @nki.jit kernels): elements per
second for a tiled add and a tiled matmul, each against the same computation as one native CPU
PyTorch op in the same process (the simulator interprets every instruction in Python, so it is
meant for correctness, not speed). Each figure is the median of several rounds, with the
spread (min..max) beside it.
Run: `.venv/bin/python benchmarks/nki_simulator.py [--rounds 5] [--markdown]` from the
repository root.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import torch
from timing import median, seconds_per_call

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the `nki` shim lives at the repository root

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402


@nki.jit
def tiled_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    M, N = a.shape
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            rows, cols = nl.ds(m * 128, 128), nl.ds(n * 512, 512)
            x, y = nl.load(a[rows, cols]), nl.load(b[rows, cols])
            z = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
            nl.store(out[rows, cols], z)
    return out


@nki.jit
def tiled_matmul(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                s = nl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                v = nl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=s, moving=v)
            res = nl.ndarray((128, 512), lhsT.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nl.store(out[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], res)
    return out


def measure(fn, elements: int, rounds: int) -> tuple[float, float, float]:
    fn()  # warm-up: first-call costs
    rates = [elements / seconds_per_call(fn, 1) for _ in range(rounds)]
    return median(rates), min(rates), max(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    lhsT, rhs = torch.randn(512, 512), torch.randn(512, 1024)
    an, bn, ln, rn = (t.to("neuron") for t in (a, b, lhsT, rhs))
    torch.testing.assert_close(tiled_add(an, bn).cpu(), a + b)
    torch.testing.assert_close(tiled_matmul(ln, rn).cpu(), lhsT.T @ rhs, rtol=1e-4, atol=1e-3)

    cases = [
        ("tiled add 2048x2048 fp32 (64 tiles of 128x512)", a.numel(),
         lambda: tiled_add(an, bn), lambda: torch.add(a, b)),
        ("tiled matmul 512x512 @ 512x1024 fp32 (32 nc_matmul)", 512 * 1024,
         lambda: tiled_matmul(ln, rn), lambda: lhsT.T @ rhs),
    ]
    rows = []
    for name, elements, simulated, native in cases:
        sim = measure(simulated, elements, args.rounds)
        cpu = measure(native, elements, args.rounds)
        rows.append((name, sim, cpu[0], cpu[0] / sim[0]))

    threads = torch.get_num_threads()
    if args.markdown:
        print(f"NKI simulator, {threads} intra-op threads, median of {args.rounds} rounds "
              "(output elements per second):\n")
        print("| kernel | simulator elements/s (min..max) | native CPU op elements/s | CPU/simulator |")
        print("|---|---|---|---|")
        for name, (med, lo, hi), cpu, ratio in rows:
            print(f"| {name} | {med:.3g} ({lo:.3g}..{hi:.3g}) | {cpu:.3g} | {ratio:.0f}x |")
    else:
        print(f"threads={threads} rounds={args.rounds}")
        for name, (med, lo, hi), cpu, ratio in rows:
            print(f"{name}: simulator {med:.3g} elements/s (min {lo:.3g}, max {hi:.3g}); "
                  f"native CPU {cpu:.3g} elements/s; CPU/simulator {ratio:.0f}x")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - start:.1f} s)", file=sys.stderr)
