"""torch.compile on neuron against the CPU, in one run: for each workload, neuron eager, neuron
compiled (backend="neuron"), CPU eager and CPU compiled (Inductor), interleaved, best of several
rounds, after compiling and warming up every variant. Prints milliseconds per call and the
ratios that matter, with their targets: neuron compiled / CPU compiled <= 1.10 (compiled neuron
costs what compiled CPU does), and compiling speeds neuron up at least as much as the CPU.
`NEURON_COMPILE_GEMM=aten` compares with the CPU's matmul kernels in compiled neuron graphs.
A neuron batch ends with torch.neuron.synchronize (queued work counts, in every eager mode),
every call's result is held until its batch is timed, the optimizer runs its per-tensor loop
(`foreach=False`) on both devices, and the process keeps freed memory
(benchmarks/timing.py's keep_freed_memory) so that the CPU's tensors are not page-faulted anew.
Run: `.venv/bin/python benchmarks/compile.py [--threads 1] [--only CNN] [--clock cpu]` (about
two minutes on 2 cores, most of it compiling).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from timing import best_interleaved, finish_for, keep_freed_memory, settings
from torchneuron.compile import onednn_gemm

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "compile"))
from compile_models import CNN, MLP, TransformerBlock  # noqa: E402  (the models the tests check)


# Wall time is what a user sees; process CPU time leaves out the time other jobs on a busy host
# take the cores away, so with --threads 1 it is the steadier measure of what each variant costs.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def compiled_on(model, device: str, compiled: bool):
    """`model` itself, or compiled with the backend each device is compiled with."""
    if not compiled:
        return model
    # Static shapes on both devices. Dynamo keeps its automatic-dynamic record per code object,
    # and every compiled module runs through the same wrapper code, so without dynamic=False the
    # first variant compiled after another workload (neuron's) got a dynamic-shape graph and the
    # second (the CPU's) a static one. (Measured on a fresh cache, both took the same time.)
    return torch.compile(model, backend="neuron" if device == "neuron" else "inductor",
                         dynamic=False)


def inference(model, x, device: str, compiled: bool):
    fn = compiled_on(model.to(device).eval(), device, compiled)
    x = x.to(device)

    def step():
        with torch.no_grad():
            return fn(x)

    return step


def transformer_forward(device: str, compiled: bool):
    return inference(TransformerBlock(dim=256, heads=8), torch.randn(4, 128, 256), device,
                     compiled)


def cnn_inference(device: str, compiled: bool):
    return inference(CNN(), torch.randn(32, 3, 32, 32), device, compiled)


def mlp_training_step(device: str, compiled: bool):
    torch.manual_seed(0)
    model = MLP(width=512).to(device)
    # foreach=False on both devices: PyTorch's default is foreach on PrivateUse1, a loop on CPU.
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=False)
    x, y = torch.randn(256, 32, device=device), torch.randint(0, 8, (256,), device=device)
    fn = compiled_on(model, device, compiled)

    def step():
        loss = torch.nn.functional.cross_entropy(fn(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


WORKLOADS = {
    "transformer block forward": (transformer_forward, 20),
    "MLP training step": (mlp_training_step, 50),
    "CNN inference": (cnn_inference, 50),
}
VARIANTS = (("neuron", False), ("neuron", True), ("cpu", False), ("cpu", True))


def measure(rounds: int, clock=time.perf_counter, workloads=None
            ) -> dict[str, dict[tuple[str, bool], float]]:
    results = {}
    for name, (make, number) in (workloads or WORKLOADS).items():
        torch._dynamo.reset()  # each workload's graphs compiled as in a fresh process
        steps = {v: make(*v) for v in VARIANTS}
        for step in steps.values():  # compile and warm up before any timing
            step()
            step()
        # Interleaved, so every variant sees the same machine load; a neuron batch ends when the
        # device has run it.
        results[name] = best_interleaved(steps, number, rounds, clock,
                                         finish={v: finish_for(v[0]) for v in VARIANTS},
                                         keep_results=True)
    return results


def table(results) -> str:
    lines = ["| workload | neuron eager | neuron compiled | CPU eager | CPU compiled | "
             "neuron compiled / CPU compiled | compile speed-up neuron | compile speed-up CPU |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, t in results.items():
        ne, nc, ce, cc = (t[v] * 1e3 for v in VARIANTS)
        lines.append(f"| {name} | {ne:.3f} ms | {nc:.3f} ms | {ce:.3f} ms | {cc:.3f} ms | "
                     f"{nc / cc:.2f}x | {ne / nc:.2f}x | {ce / cc:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    keep_freed_memory()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="intra-op threads for every variant (1 is steadiest on a busy host)")
    parser.add_argument("--only", help="run only the workloads whose name contains this")
    parser.add_argument("--clock", choices=CLOCKS, default="wall",
                        help="wall time, or process CPU time (steadier on a busy host with "
                             "--threads 1; with more threads it counts OpenMP's spinning too)")
    parser.add_argument("--markdown", action="store_true",
                        help="settings as a sentence, then the table (for docs/performance.md)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name in [n for n in WORKLOADS if args.only and args.only not in n]:
        del WORKLOADS[name]
    results = measure(args.rounds, CLOCKS[args.clock])
    print(f"{settings()} at the end, best of {args.rounds} rounds, {args.clock} clock, "
          f"compiled neuron matmuls: {onednn_gemm.setting()} (NEURON_COMPILE_GEMM)"
          + (".\n" if args.markdown else ""))
    print(table(results))


if __name__ == "__main__":
    main()
