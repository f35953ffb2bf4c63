"""Eager overhead of the neuron device against native CPU PyTorch on the same machine.

Each case runs on neuron and on CPU in the same process, interleaved, best of several rounds;
the ratio neuron/CPU is the overhead torchneuron adds (every neuron kernel is a CPU kernel).
The last row is the demo's training loop (60 steps) in a fresh process per device, its peak
resident memory (VmHWM); the CPU process does not load torchneuron at all. Targets: small ops
<= 1.3x, model steps <= 1.05x (the small LSTM LM's <= 1.2x), allocator <= 1.2x, peak memory
<= 1.1x. The optimizers run AdamW's per-tensor loop (`foreach=False`) on both sides: PyTorch's
default is `foreach` on PrivateUse1 devices, as on CUDA, and the loop on the CPU, which would
compare two programs.
Each neuron batch ends with `torch.neuron.synchronize()`, so that queued work counts in every
eager mode (`--mode`, NEURON_EAGER_MODE), and every call's return value is held until its batch
is timed, on both sides (a deferring mode may skip a result nothing holds). The process runs
with glibc told to keep freed memory (benchmarks/timing.py's keep_freed_memory), so that the
CPU's tensors are not page-faulted afresh on every call while neuron's allocator caches its own.
Run: `.venv/bin/python benchmarks/eager_overhead.py [--threads 1] [--mode sync|async|fused]`
(or `make bench`) from the repository root.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
from typing import Callable

import torch
from timing import KEEP_FREED_MEMORY, best_interleaved, finish_for, keep_freed_memory, settings

from torchneuron.runtime.config import EAGER_MODES

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for demo.gpt


def small_op_cases(device: str) -> dict[str, tuple[Callable[[], object], int]]:
    a16 = torch.randn(16, device=device)
    m64 = torch.randn(64, 64, device=device)
    lin = torch.nn.Linear(16, 16).to(device)
    x16 = torch.randn(8, 16, device=device)
    view_base = torch.randn(64, 64, device=device)
    scalar = torch.randn((), device=device)
    host = torch.randn(1024)  # 4 KiB

    lin64 = torch.nn.Linear(64, 64).to(device)
    x64 = torch.randn(8, 64, device=device)

    def linear_fwd_bwd():
        loss = lin(x16).sum()
        loss.backward()
        return loss.detach()

    def linear64_fwd_bwd():
        loss = lin64(x64).sum()
        loss.backward()
        return loss.detach()

    return {
        "add 16 floats": (lambda: a16 + a16, 2000),
        "matmul 64x64": (lambda: m64 @ m64, 1000),
        "Linear(16,16) fwd+bwd": (linear_fwd_bwd, 300),
        "Linear(64,64) fwd+bwd": (linear64_fwd_bwd, 300),
        "in-place on a view": (lambda: view_base[:, 3].add_(1.0), 2000),
        ".item()": (lambda: scalar.item(), 2000),
        # copy=True: on the CPU side a plain .to("cpu") would return the tensor itself
        "cpu->device copy 4 KiB": (lambda: host.to(device, copy=True), 2000),
    }


def demo_gpt_step(device: str) -> Callable[[], torch.Tensor]:
    """The demo GPT's training step on a batch of 16 sequences of 64 tokens (also timed by
    benchmarks/adaptive_eager.py, in each eager mode)."""
    from demo.gpt import GPT

    gpt = GPT(vocab=64, block=64).to(device)
    gpt_opt = torch.optim.AdamW(gpt.parameters(), lr=1e-3, foreach=False)  # as on the CPU
    idx = torch.randint(0, 64, (16, 64), device=device)

    def gpt_step():
        gpt_opt.zero_grad(set_to_none=True)
        loss = gpt(idx, idx)[1]
        loss.backward()
        gpt_opt.step()
        return loss.detach()

    return gpt_step


def lstm_lm_step(device: str) -> Callable[[], torch.Tensor]:
    """A small LSTM language model's training step, the shape of PyTorch's word_language_model
    example (embedding, 2-layer LSTM with dropout, decoder, gradient clipping, SGD): op-bound,
    and nn.LSTM is one op on the CPU (oneDNN), which neuron runs as the CPU does
    (torchneuron/ops/recurrent.py)."""
    torch.manual_seed(0)
    vocab, width, bptt, batch = 200, 64, 35, 10
    emb = torch.nn.Embedding(vocab, width).to(device)
    rnn = torch.nn.LSTM(width, width, num_layers=2, dropout=0.2).to(device)
    decoder = torch.nn.Linear(width, vocab).to(device)
    params = [*emb.parameters(), *rnn.parameters(), *decoder.parameters()]
    opt = torch.optim.SGD(params, lr=0.1, foreach=False)  # as on the CPU
    data = torch.randint(0, vocab, (bptt + 1, batch), device=device)
    hidden = tuple(torch.zeros(2, batch, width, device=device) for _ in range(2))

    def step():
        opt.zero_grad(set_to_none=True)
        out, _ = rnn(emb(data[:-1]), hidden)
        loss = torch.nn.functional.cross_entropy(decoder(out).view(-1, vocab),
                                                 data[1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.25, foreach=False)  # as on the CPU
        opt.step()
        return loss.detach()

    return step


def model_cases(device: str) -> dict[str, tuple[Callable[[], object], int]]:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(),
                              torch.nn.Linear(2048, 512)).to(device)
    opt = torch.optim.AdamW(mlp.parameters(), lr=1e-3, foreach=False)  # as on the CPU
    x = torch.randn(64, 512, device=device)

    def mlp_step():
        opt.zero_grad(set_to_none=True)
        loss = mlp(x).square().mean()
        loss.backward()
        opt.step()
        return loss.detach()

    gpt_step = demo_gpt_step(device)

    sizes = [(int(s) * 64) for s in torch.randint(1, 4096, (64,), generator=torch.Generator().manual_seed(0))]

    def alloc_cycles():  # 10,000 allocate/free cycles of mixed sizes
        for i in range(10_000):
            torch.empty(sizes[i % 64], dtype=torch.uint8, device=device)

    from torchneuron.compat.models.minilm import SENTENCES, load

    minilm = load(device)

    def minilm_batch():
        with torch.no_grad():
            minilm.encode(list(SENTENCES[:16]), batch_size=16, convert_to_tensor=True)

    return {
        "MLP 512-2048-512 AdamW step": (mlp_step, 20),
        "all-MiniLM-L6-v2 batch 16": (minilm_batch, 10),
        "GPT (demo) training step": (gpt_step, 5),
        "LSTM LM (2x64, 35 steps) training step": (lstm_lm_step(device), 20),
        "allocator 10k alloc/free": (alloc_cycles, 2),
    }


def measure(rounds: int, cases=None) -> list[tuple[str, float, float]]:
    cases = cases or small_op_cases
    neuron, cpu = cases("neuron"), cases("cpu")
    rows = []
    for name in neuron:
        fn_n, number = neuron[name]
        fn_c, _ = cpu[name]
        # Interleaved, so both see the same machine load; a warm-up call before each batch.
        best = best_interleaved({"neuron": fn_n, "cpu": fn_c}, number, rounds, warmup=True,
                                finish={"neuron": finish_for("neuron")}, keep_results=True)
        rows.append((name, best["neuron"], best["cpu"]))
    return rows


# The demo's training loop in a fresh process, which prints its peak resident set (KiB). VmHWM,
# not getrusage's ru_maxrss: a child started from this (large) process inherits its ru_maxrss.
DEMO_PEAK_RSS = """
import argparse, re, sys
import torch
from demo.train_gpt import load_corpus, train
data, vocab = load_corpus()
train(sys.argv[1], data, vocab, argparse.Namespace(steps=60, batch=16, block=64, seed=1337))
print(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


def demo_peak_rss_mib(device: str) -> float:
    """Peak resident memory of the demo's training on `device`. The CPU run is native PyTorch:
    torchneuron is not even imported (backend autoload off)."""
    # As a user runs it: glibc's default, not this benchmark's timing setting.
    env = {k: v for k, v in os.environ.items() if k not in KEEP_FREED_MEMORY}
    if device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    done = subprocess.run([sys.executable, "-c", DEMO_PEAK_RSS, device], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1]) / 1024


def text_table(rows, rss_n: float, rss_c: float) -> str:
    lines = [f"{'case':<26} {'neuron us':>10} {'cpu us':>10} {'neuron/cpu':>11}"]
    for name, t_n, t_c in rows:
        lines.append(f"{name:<26} {t_n * 1e6:>10.2f} {t_c * 1e6:>10.2f} {t_n / t_c:>10.2f}x")
    lines.append(f"{'demo peak RSS (MiB)':<26} {rss_n:>10.1f} {rss_c:>10.1f} {rss_n / rss_c:>10.2f}x")
    return "\n".join(lines)


def markdown_table(rows, rss_n: float, rss_c: float) -> str:
    lines = ["| case | neuron | CPU | neuron / CPU |", "|---|---:|---:|---:|"]
    for name, t_n, t_c in rows:
        lines.append(f"| {name} | {t_n * 1e6:.2f} us | {t_c * 1e6:.2f} us | {t_n / t_c:.2f}x |")
    lines.append(f"| demo peak RSS | {rss_n:.1f} MiB | {rss_c:.1f} MiB | {rss_n / rss_c:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    keep_freed_memory()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="intra-op threads for both sides (1 is steadier on a busy machine)")
    parser.add_argument("--markdown", action="store_true",
                        help="print the settings and a Markdown table (for docs/performance.md)")
    parser.add_argument("--mode", choices=EAGER_MODES, default=None,
                        help="NEURON_EAGER_MODE for this run (default: the environment's)")
    args = parser.parse_args()
    if args.mode is not None:  # read at the first device use, which comes below
        os.environ["NEURON_EAGER_MODE"] = args.mode
    torch.set_num_threads(args.threads)
    model_rounds = max(2, args.rounds // 2)
    rows = measure(args.rounds) + measure(model_rounds, model_cases)
    rss_n, rss_c = demo_peak_rss_mib("neuron"), demo_peak_rss_mib("cpu")
    line = f"{settings()} at the end, best of {args.rounds} rounds (models: {model_rounds})"
    if args.markdown:
        print(f"{line}.\n")
        print(markdown_table(rows, rss_n, rss_c))
    else:
        print(line)
        print(text_table(rows, rss_n, rss_c))


if __name__ == "__main__":
    main()
