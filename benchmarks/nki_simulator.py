"""Speed of the NKI simulator (the software NeuronCore running @nki.jit kernels) on the tutorials'
matmul kernels and a flash-attention forward kernel: per kernel, seconds per call now and with the
simulator of a baseline revision (run in a subprocess from that revision's files and its own C++
extension, built once into build/nki-baseline/; the same kernels and inputs, the same host at the
same time), the instructions per second, and the time
of the same math as native PyTorch CPU ops in this process. Every result is checked against a
torch reference, and the baseline's outputs against today's (max |difference|).
Times are wall seconds, the median of the rounds with the spread (min..max) beside it; the
speed-up is also given in the process's CPU time, which a busy shared host disturbs less.
Run: `.venv/bin/python benchmarks/nki_simulator.py [--rounds 3] [--baseline-rounds 2]
[--baseline REV | --no-baseline] [--markdown]` from the repository root.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The simulator before issue 44 (the last revision of torchneuron/kernels before it).
BASELINE_REV = "0fbe7de"


def load_kernels():
    """The kernels, from whichever torchneuron and `nki` this interpreter imports."""
    spec = importlib.util.spec_from_file_location(
        "tutorial_kernels", ROOT / "tests" / "kernels" / "tutorial_kernels.py")
    tutorials = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tutorials)
    from torchneuron.kernels.library.attention import attention_forward_kernel
    return tutorials, attention_forward_kernel


def cases():
    """name -> (inputs, simulated call, torch CPU call of the same math, tolerance)."""
    import torch
    import torch.nn.functional as F
    tutorials, flash = load_kernels()
    gen = torch.Generator().manual_seed(0)
    K, M, N = 1024, 2048, 1024
    lhsT = torch.randn(K, M, generator=gen).bfloat16()
    rhs = torch.randn(K, N, generator=gen).bfloat16()
    heads, seq, d = 4, 1024, 128
    q, k, v = (torch.randn(heads, seq, d, generator=gen).bfloat16() for _ in range(3))
    scale = 1 / math.sqrt(d)

    def matmul_cpu():
        return (lhsT.float().T @ rhs.float()).bfloat16()

    def flash_cpu():
        return F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]

    return {
        f"matmul_tiled {M}x{K}x{N} bf16 (tutorial)":
            (lambda: tutorials.matmul_tiled(lhsT, rhs), tutorials.matmul_tiled, matmul_cpu, 2e-2),
        f"matmul_blocked {M}x{K}x{N} bf16 (tutorial)":
            (lambda: tutorials.matmul_blocked(lhsT, rhs), tutorials.matmul_blocked, matmul_cpu,
             2e-2),
        f"flash attention forward {heads}x{seq}x{d} bf16 causal (kernel library)":
            (lambda: flash(q, k, v, scale, True)[0], flash, flash_cpu, 2e-2),
    }


def measure(rounds: int, with_cpu: bool, outputs_path: str | None) -> dict:
    import torch
    results, outputs = {}, {}
    for name, (simulated, kernel, cpu, tol) in cases().items():
        out = simulated()  # warm-up, and the result to check
        torch.testing.assert_close(out.float(), cpu().float(), rtol=tol, atol=tol)
        outputs[name] = out
        times, cpu_times = [], []
        for _ in range(rounds):
            start, start_cpu = time.perf_counter(), time.process_time()
            simulated()
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - start_cpu)
        entry = {"times": times, "cpu_times": cpu_times,
                 "instructions": getattr(kernel, "last_instructions", None)}
        if with_cpu:
            cpu()
            entry["cpu"] = [timed(cpu) for _ in range(max(rounds, 5))]
        results[name] = entry
    if outputs_path:
        torch.save(outputs, outputs_path)
    return {"results": results, "outputs": outputs}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def baseline_checkout(rev: str) -> pathlib.Path:
    """Revision `rev`'s whole tree with its own C++ extension, built once for this torch and kept
    in build/nki-baseline/ (a few minutes the first time). The extension must be the revision's
    own: its Python calls the bindings it was written against, which later builds rename."""
    import torch

    folder = ROOT / "build" / "nki-baseline" / f"{rev}-torch-{torch.__version__}"
    done = folder / ".built"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    print(f"building revision {rev}'s extension once, into {folder.relative_to(ROOT)} "
          "(a few minutes)", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=folder,
                   check=True, capture_output=True)
    done.touch()
    return folder


def baseline(rev: str, rounds: int, outputs_path: str) -> dict:
    """Runs `--measure` in a subprocess over revision `rev`'s torchneuron and `nki`, with that
    revision's own extension (baseline_checkout)."""
    folder = baseline_checkout(rev)
    env = dict(os.environ, PYTHONPATH=str(folder))
    done = subprocess.run([sys.executable, __file__, "--measure", "--rounds", str(rounds),
                           "--outputs", outputs_path], env=env, capture_output=True, text=True,
                          cwd=folder)
    if done.returncode != 0:
        raise RuntimeError(f"the baseline run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(xs) -> str:
    return f"{statistics.median(xs):.3g} ({min(xs):.3g}..{max(xs):.3g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-rounds", type=int, default=2)
    parser.add_argument("--baseline", default=BASELINE_REV)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--outputs", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.measure:  # the baseline's side: times only, as one JSON line
        measured = measure(args.rounds, with_cpu=False, outputs_path=args.outputs)
        print(json.dumps(measured["results"]))
        return

    sys.path.insert(0, str(ROOT))  # the `nki` shim lives at the repository root
    import torch
    before, diffs = {}, {}
    if not args.no_baseline:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "outputs.pt")
            before = baseline(args.baseline, args.baseline_rounds, path)
            before_outputs = torch.load(path)
    now = measure(args.rounds, with_cpu=True, outputs_path=None)
    if before:
        diffs = {name: (now["outputs"][name].float() - before_outputs[name].float()).abs().max()
                 .item() for name in now["outputs"]}

    threads = torch.get_num_threads()
    rows = []
    for name, entry in now["results"].items():
        after = statistics.median(entry["times"])
        after_cpu = statistics.median(entry["cpu_times"])
        old = before.get(name, {}).get("times")
        old_cpu = before.get(name, {}).get("cpu_times")
        instructions = entry["instructions"]
        rows.append((name, spread(old) if old else "-", spread(entry["times"]),
                     f"{statistics.median(old) / after:.1f}x" if old else "-",
                     f"{statistics.median(old_cpu) / after_cpu:.1f}x" if old_cpu else "-",
                     f"{instructions} / {instructions / after:.3g}",
                     spread(entry["cpu"]), f"{after / statistics.median(entry['cpu']):.0f}x",
                     f"{diffs[name]:.3g}" if name in diffs else "-"))
    header = ("kernel", f"before ({args.baseline}) s", "after s", "speed-up",
              "speed-up in CPU time",
              "instructions / per s", "torch CPU s", "after/CPU", "max |after-before|")
    load = os.getloadavg()[0]
    print(f"NKI simulator, {threads} intra-op threads, host load {load:.1f}, median of "
          f"{args.rounds} rounds ({args.baseline_rounds} for the baseline), seconds per call:\n")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in rows:
            print("; ".join(f"{h}: {v}" for h, v in zip(header, row)))


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - start:.1f} s)", file=sys.stderr)
