"""Adaptive eager: neuron in each eager mode (NEURON_EAGER_MODE) against native CPU eager.

Every mode torchneuron's configuration accepts (EAGER_MODES in torchneuron/runtime/config.py, so
a new mode such as fused is picked up) and native CPU PyTorch each run in a process of their own,
started together and timed in interleaved rounds (each round times a case once in every process,
so all sides see the same machine load), at the same intra-op thread count. The CPU process runs
with glibc told to keep freed memory (benchmarks/timing.py's KEEP_FREED_MEMORY), so that a
caching allocator alone is not counted as a win. Cases: a chain of 20
pointwise ops on 1M floats; a Llama-style decoder block's training step in plain ops (256 tokens,
hidden 512, 8 heads, SwiGLU 1376; RMSNorm as pow/mean/rsqrt/mul, rotary embeddings, causal
attention as matmul + mask + softmax, AdamW's per-tensor loop on both sides); the demo GPT's
training step and the small cases of benchmarks/eager_overhead.py. Every call's return value
is held until its batch has been timed, on every side: a program uses what it computes, and
the fused mode never computes a result nothing holds; a neuron batch ends with
torch.neuron.synchronize. A figure is seconds per call,
the median over the rounds with the spread (min-max); a ratio is CPU time / neuron time (above
1: neuron is faster), marked `*` where it misses the fused mode's target (pointwise chain 2x,
decoder block 1.15x, GPT step 1x, small cases at most 1.2x the CPU's time). "= sync" says
whether a mode's results (the last call's return value and the parameters, gradients and tensors
the case holds) equal the sync mode's, on fresh copies of the cases run twice after the timing
(when a fusing mode's chains are hot): bitwise, close (torch.testing.assert_close, float32
tolerance) or DIFF.
`--profile` runs the decoder block under torch.profiler instead, on the CPU and in each mode, and
prints the split of its time between matmul, attention's softmax, pointwise ops and reductions,
and the rest (copies, views, allocation, autograd and optimizer overhead), by the ops' self CPU
time and, on neuron, by the device's kernel time; then the top ops.
Run: `.venv/bin/python benchmarks/adaptive_eager.py [--threads 1] [--repeats 5] [--profile]
[--markdown]` from the repository root (`--tiny`: a smoke run at tiny sizes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from timing import KEEP_FREED_MEMORY, finish_for, median, seconds_per_call

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for demo.gpt, which eager_overhead's GPT step imports

PROTOCOL = "@@adaptive_eager "  # marks a worker's replies among anything else it prints
CHECK_CALLS = 2  # calls of each fresh case before its results are compared with the sync mode's


@dataclass(frozen=True)
class Sizes:
    chain_elements: int
    batch: int
    seq: int
    dim: int
    heads: int
    ffn: int
    tiny: bool = False  # also cuts every case's calls per timed batch (the tests' smoke run)

    def calls(self, number: int) -> int:
        return max(1, number // 100) if self.tiny else number


# The decoder block's shapes put about three quarters of its CPU time into matmuls and attention
# (the premise of the fused mode's target; --profile measures it) while a step stays short on a
# 2-core machine.
DEFAULT_SIZES = Sizes(chain_elements=1 << 20, batch=1, seq=256, dim=512, heads=8, ffn=1376)
TINY_SIZES = Sizes(chain_elements=4096, batch=1, seq=16, dim=32, heads=2, ffn=64, tiny=True)


@dataclass(frozen=True)
class Case:
    fn: Callable[[], object]
    number: int  # calls per timed batch
    target: float  # the CPU/neuron ratio asked of the fused mode (issue 27)
    # Whether a timed batch holds every call's return value until it is timed (see the module's
    # docstring); every case does, as benchmarks/eager_overhead.py times them.
    keep_results: bool = True


# --- the cases ------------------------------------------------------------------------------

# Twenty single elementwise ops whose values stay finite and O(1) for any float input.
POINTWISE_CHAIN: tuple[Callable[[torch.Tensor], torch.Tensor], ...] = (
    lambda y: y * 0.5, lambda y: y + 0.25, torch.sin, lambda y: y * y, torch.exp,
    lambda y: y - 1.0, torch.sqrt, torch.tanh, lambda y: y * 3.0, torch.sigmoid,
    lambda y: y / 1.5, torch.cos, torch.neg, torch.abs, lambda y: y + 1.0,
    torch.log, torch.relu, lambda y: y * y, lambda y: y.clamp(max=0.4), lambda y: y + 0.5,
)


def pointwise_chain_case(device: str, sizes: Sizes) -> Case:
    x = torch.randn(sizes.chain_elements).to(device)

    def pointwise_chain():
        y = x
        for op in POINTWISE_CHAIN:
            y = op(y)
        return y

    return Case(pointwise_chain, sizes.calls(5), target=2.0)


class DecoderBlock(torch.nn.Module):
    """One Llama decoder layer written with plain ops, as a model without fused kernels runs it."""

    def __init__(self, sizes: Sizes):
        super().__init__()
        dim, ffn, self.heads = sizes.dim, sizes.ffn, sizes.heads
        head_dim = dim // sizes.heads

        def weight(rows, cols):
            return torch.nn.Parameter(torch.randn(rows, cols) * cols ** -0.5)

        self.attn_norm, self.mlp_norm = (torch.nn.Parameter(torch.ones(dim)) for _ in range(2))
        self.wq, self.wk, self.wv, self.wo = (weight(dim, dim) for _ in range(4))
        self.w_gate, self.w_up, self.w_down = weight(ffn, dim), weight(ffn, dim), weight(dim, ffn)
        angles = torch.outer(torch.arange(sizes.seq, dtype=torch.float32),
                             10000.0 ** (-torch.arange(0, head_dim, 2) / head_dim))
        self.register_buffer("cos", angles.cos().repeat(1, 2))
        self.register_buffer("sin", angles.sin().repeat(1, 2))
        self.register_buffer("causal_mask",
                             torch.full((sizes.seq, sizes.seq), float("-inf")).triu(1))

    @staticmethod
    def rms_norm(x, weight, eps=1e-6):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    def rope(self, x):
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * self.cos + rotated * self.sin

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = (F.linear(x, w).view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        q, k = self.rope(q), self.rope(k)
        scores = q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5 + self.causal_mask
        out = torch.softmax(scores, dim=-1) @ v
        return F.linear(out.transpose(1, 2).reshape(b, t, d), self.wo)

    def forward(self, x):
        h = x + self.attention(self.rms_norm(x, self.attn_norm))
        n = self.rms_norm(h, self.mlp_norm)
        return h + F.linear(F.silu(F.linear(n, self.w_gate)) * F.linear(n, self.w_up), self.w_down)


def decoder_step_case(device: str, sizes: Sizes) -> Case:
    block = DecoderBlock(sizes).to(device)
    x = torch.randn(sizes.batch, sizes.seq, sizes.dim).to(device)
    target = torch.randn(sizes.batch, sizes.seq, sizes.dim).to(device)
    # foreach=False on both sides: PyTorch's default differs between the CPU (per-tensor loop)
    # and PrivateUse1 devices (foreach), which would compare two different programs.
    opt = torch.optim.AdamW(block.parameters(), lr=1e-3, foreach=False)

    def decoder_step():
        opt.zero_grad(set_to_none=True)
        loss = (block(x) - target).pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    return Case(decoder_step, sizes.calls(3), target=1.15)


def build_cases(device: str, sizes: Sizes) -> dict[str, Case]:
    """Every case on `device`, from the same seed in every process."""
    import eager_overhead  # imports torchneuron (its small cases name the device)

    torch.manual_seed(0)
    cases = {
        f"pointwise chain: 20 ops, {sizes.chain_elements} floats":
            pointwise_chain_case(device, sizes),
        f"decoder block step: {sizes.batch}x{sizes.seq}, dim {sizes.dim}, ffn {sizes.ffn}":
            decoder_step_case(device, sizes),
        "GPT (demo) training step": Case(eager_overhead.demo_gpt_step(device), sizes.calls(2), 1.0),
    }
    for name, (fn, number) in eager_overhead.small_op_cases(device).items():
        cases[name] = Case(fn, sizes.calls(number), target=1 / 1.2)  # at most 1.2x CPU time
    return cases


def observable(fn: Callable[[], object], returned: object) -> list[torch.Tensor]:
    """What a call of `fn` leaves behind, on the CPU: its return value and the tensors and modules
    (parameters and gradients) its closure holds. eager_overhead's training cases return nothing;
    their effect is on what they close over."""
    found: list[torch.Tensor] = []

    def add(value):
        if isinstance(value, torch.Tensor):
            found.append(value.detach().cpu())
        elif isinstance(value, (bool, int, float)):
            found.append(torch.tensor(value))
        elif isinstance(value, torch.nn.Module):
            for p in value.parameters():
                add(p)
                add(p.grad)
        elif isinstance(value, (list, tuple)):
            for item in value:
                add(item)

    add(returned)
    for cell in fn.__closure__ or ():
        add(cell.cell_contents)
    return found


def agreement(reference: list[torch.Tensor], results: list[torch.Tensor]) -> tuple[str, str]:
    """("bitwise" | "close" | "DIFF", why) for one case's results against the sync mode's."""
    if len(reference) != len(results):
        return "DIFF", f"{len(results)} outputs where sync has {len(reference)}"
    if all(a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
           for a, b in zip(reference, results)):
        return "bitwise", ""
    try:
        for a, b in zip(reference, results):
            torch.testing.assert_close(b, a)
    except AssertionError as e:
        return "DIFF", " ".join(str(e).split())
    return "close", ""


# --- the decoder block's profile ------------------------------------------------------------

MATMUL_OPS = {"mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot"}
ATTENTION_OPS = {"softmax", "_softmax", "_softmax_backward_data", "_safe_softmax"}
CATEGORIES = ("matmul", "attention softmax", "pointwise + reductions", "rest")
PROFILED_STEPS = 5


def category(key: str) -> str:
    """Where a profiler row's self time goes. "rest" is what fusion of elementwise chains cannot
    touch either: copies, concatenations, views, allocation, autograd and optimizer overhead."""
    if not key.startswith("aten::"):
        return "rest"
    name = key.removeprefix("aten::")
    if name in MATMUL_OPS:
        return "matmul"
    if name in ATTENTION_OPS:
        return "attention softmax"
    packet = getattr(torch.ops.aten, name, None)
    tags = {t for o in packet.overloads() for t in getattr(packet, o).tags} if packet else set()
    if name.startswith("_foreach_") or tags & {torch.Tag.pointwise, torch.Tag.reduction}:
        return "pointwise + reductions"
    return "rest"


def profile_decoder(device: str, sizes: Sizes, finish: Callable[[], object] | None,
                    steps: int = PROFILED_STEPS) -> dict:
    """The decoder block's step profiled `steps` times, one step per profile; the step whose
    wall time is the median stands for all (on a shared machine one step in a few is disturbed,
    and a disturbance lands in one op, which a sum over steps would carry)."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    step = decoder_step_case(device, sizes).fn
    for _ in range(3):  # warm: first calls, caches, hot chains
        step()
    activities = [ProfilerActivity.CPU]
    if device != "cpu":
        activities.append(ProfilerActivity.PrivateUse1)  # the device's kernels, where they run
    profiled = []
    for _ in range(steps):
        with profile(activities=activities) as prof:
            wall_s = seconds_per_call(step, 1, finish=finish, keep_results=True)
        profiled.append((wall_s, prof))
    wall_s, prof = sorted(profiled, key=lambda p: p[0])[steps // 2]
    # A kernel is a row of its own (device type PrivateUse1) and is also counted in the device
    # time of the CPU op that launched it: each split below sums one kind of row only.
    rows = [{"op": e.key, "category": category(e.key), "calls": e.count,
             "kernel": e.device_type != torch.autograd.DeviceType.CPU,
             "self_cpu_us": e.self_cpu_time_total, "device_us": e.self_device_time_total}
            for e in prof.key_averages()]
    return {"rows": rows, "wall_s": wall_s}


# --- a worker: one side (the CPU or one eager mode) in its own process ----------------------


def reply(message: dict) -> None:
    print(PROTOCOL + json.dumps(message), flush=True)


def warm_up(case: Case, device: str, first: bool) -> None:
    """First-call work, a heap growing to its working size and, in a fusing mode, the case's
    chains made hot and compiled, so that every side is timed in its steady state. A case's
    first calls make chains of their own (an op's first queued call runs unfused), so its
    steady chains count from the third call on: on its first warm-up the case runs in rounds of
    NEURON_FUSION_HOT + 1 calls until a round asks for no new compile. Where the timed calls
    hold their results, a round holds its calls' results until it is done (a chain whose result
    is held is another chain than one whose result is dropped)."""
    if device == "cpu":
        seconds_per_call(case.fn, 3, keep_results=case.keep_results)
        return
    from torchneuron.fused_eager import queue_feeder
    from torchneuron.runtime import config

    def settle() -> None:  # queued work done and every requested compile installed
        torch.neuron.synchronize()
        if not queue_feeder.wait(600):
            raise RuntimeError("the fused mode's compile thread did not finish within 600 s")

    def calls(number: int) -> None:  # `number` calls, settled while their results are held
        seconds_per_call(case.fn, number, finish=settle, keep_results=case.keep_results)

    calls(3)
    for _ in range(8 if first else 0):
        requested = queue_feeder.stats()["requested"]
        calls(config.current().fusion_hot + 1)
        if queue_feeder.stats()["requested"] == requested:
            break
    calls(1)  # the first call that replays the compiled chains (installing them costs once)


def time_case(case: Case, device: str) -> tuple[float, int]:
    """Seconds per call of a timed batch of `case` (its clock stopped after the device finished)
    and the minor page faults the batch took."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    seconds = seconds_per_call(case.fn, case.number, finish=finish_for(device),
                               keep_results=case.keep_results)
    return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def serve(side: str, threads: int, sizes: Sizes) -> None:
    """Answers the parent's requests on stdin, one JSON line each, until "quit"."""
    device = "cpu" if side == "cpu" else "neuron"
    torch.set_num_threads(threads)
    finish = finish_for(device)
    if device == "neuron":
        import torchneuron

        actual = torchneuron.runtime.execution.mode()
        if actual != side:
            raise SystemExit(f"worker for mode {side!r} runs in mode {actual!r}")
    cases = build_cases(device, sizes)
    warmed: set[str] = set()
    reply({"targets": {name: case.target for name, case in cases.items()}})
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "time":
            case = cases[request["case"]]
            warm_up(case, device, first=request["case"] not in warmed)
            warmed.add(request["case"])
            seconds, faults = time_case(case, device)
            reply({"seconds": seconds, "page_faults": faults})
        elif request["op"] == "check":
            cases.clear()  # fresh copies: a fused mode's compiled chains are hot by now
            fresh = build_cases(device, sizes)
            results = {}
            for name, case in fresh.items():
                for _ in range(CHECK_CALLS):
                    returned = case.fn()
                results[name] = observable(case.fn, returned)
            torch.save(results, request["path"])
            reply({})
        elif request["op"] == "profile":
            reply(profile_decoder(device, sizes, finish))
        elif request["op"] == "quit":
            return


# --- the parent: start the workers, time in rounds, compare, print ---------------------------


def sides() -> list[str]:
    """"cpu" and every eager mode torchneuron's configuration accepts, "sync" first (the
    reference the others are compared with)."""
    from torchneuron.runtime.config import EAGER_MODES

    return ["cpu", "sync", *(m for m in EAGER_MODES if m != "sync")]


class Worker:
    def __init__(self, side: str, args: argparse.Namespace):
        env = dict(os.environ)
        if side == "cpu":
            env.update(KEEP_FREED_MEMORY, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        else:
            env["NEURON_EAGER_MODE"] = side
        command = [sys.executable, __file__, "--worker", side, "--threads", str(args.threads)]
        if args.tiny:
            command.append("--tiny")
        self.side = side
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def receive(self) -> dict:
        for line in self.process.stdout:
            if line.startswith(PROTOCOL):
                return json.loads(line[len(PROTOCOL):])
            sys.stderr.write(line)  # a library's own output, not a reply
        raise RuntimeError(f"the {self.side} worker ended (exit {self.process.wait()}); "
                           f"its error is above")

    def ask(self, **request) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self.receive()

    def close(self) -> None:
        try:
            self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.process.stdin.close()
        except BrokenPipeError:  # it has ended already
            pass
        self.process.wait()


def start_workers(args: argparse.Namespace) -> tuple[dict[str, Worker], dict[str, float]]:
    """A worker for every side, and the cases they built with their targets."""
    workers = {side: Worker(side, args) for side in sides()}  # they start up together
    built = [w.receive()["targets"] for w in workers.values()]
    assert all(b == built[0] for b in built), f"the workers built different cases: {built}"
    return workers, built[0]


@dataclass
class Row:
    case: str
    target: float
    seconds: dict[str, list[float]]  # side -> seconds per call, one per round
    agreement: dict[str, tuple[str, str]]  # mode -> agreement with sync


def measure(args: argparse.Namespace) -> tuple[list[Row], dict[str, int]]:
    workers, targets = start_workers(args)
    try:
        rows = []
        faults = {side: 0 for side in workers}  # after the first round: the steady state's
        for name in targets:
            seconds: dict[str, list[float]] = {side: [] for side in workers}
            for round_ in range(args.repeats):
                for side, worker in workers.items():
                    timed = worker.ask(op="time", case=name)
                    seconds[side].append(timed["seconds"])
                    faults[side] += timed["page_faults"] if round_ > 0 else 0
            rows.append(Row(name, targets[name], seconds, {}))
        with tempfile.TemporaryDirectory() as tmp:
            results = {}
            for side, worker in workers.items():
                if side != "cpu":
                    path = os.path.join(tmp, f"{side}.pt")
                    worker.ask(op="check", path=path)
                    results[side] = torch.load(path, weights_only=True)
        for row in rows:
            row.agreement = {side: agreement(results["sync"][row.case], results[side][row.case])
                             for side in workers if side not in ("cpu", "sync")}
        return rows, faults
    finally:
        for worker in workers.values():
            worker.close()


def duration(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def spread(xs: list[float]) -> str:
    scale = 1e6 if median(xs) < 1e-3 else 1e3  # the unit duration() picks
    return f"{duration(median(xs))} ({min(xs) * scale:.1f}-{max(xs) * scale:.1f})"


def ratio(cpu: list[float], neuron: list[float], target: float) -> str:
    r = median(cpu) / median(neuron)
    return f"{r:.2f}x" + ("*" if r < target else "")


def table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    modes = [side for side in rows[0].seconds if side != "cpu"]
    header = ["case", "CPU"]
    for mode in modes:
        header += [mode, "CPU/" + mode] + ([f"{mode} = sync"] if mode != "sync" else [])
    header.append("target (fused)")
    body = []
    for row in rows:
        cells = [row.case, spread(row.seconds["cpu"])]
        for mode in modes:
            cells += [spread(row.seconds[mode]),
                      ratio(row.seconds["cpu"], row.seconds[mode], row.target)]
            if mode != "sync":
                cells.append(row.agreement[mode][0])
        cells.append(f">= {row.target:.2f}x")
        body.append(cells)
    return header, body


def render(header: list[str], body: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |",
                 "|---|" + "---:|" * (len(header) - 1)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths)))
                     for r in [header, *body])


def report(rows: list[Row], faults: dict[str, int], args: argparse.Namespace,
           load_before: float) -> None:
    print(f"torch {torch.__version__}, eager modes {', '.join(sides()[1:])} (NEURON_EAGER_MODE, "
          f"a process each), {args.threads} intra-op threads on every side, "
          f"median (min-max) of {args.repeats} interleaved rounds; time per call; "
          f"load average {load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.\n")
    print(render(*table(rows), args.markdown))
    print("\n* below the fused mode's target (CPU/neuron; small cases: neuron at most 1.2x the "
          "CPU's time).")
    print("Minor page faults in the timed calls after the first round (the CPU keeps freed "
          "memory): "
          + ", ".join(f"{side} {n}" for side, n in faults.items()) + ".")
    for row in rows:
        for mode, (verdict, why) in row.agreement.items():
            if verdict == "DIFF":
                print(f"DIFF {mode} vs sync, {row.case}: {why}")


def profile_all(args: argparse.Namespace) -> dict[str, dict]:
    """The decoder block's profile on every side, each in its worker."""
    workers, _ = start_workers(args)
    try:
        return {side: w.ask(op="profile") for side, w in workers.items()}
    finally:
        for w in workers.values():
            w.close()


def profile_split(profiles: dict[str, dict], markdown: bool) -> str:
    """One row per side and clock (self CPU time of the ops; on neuron also the device's kernel
    time): the share of each category."""
    header = ["side", "time", "step (profiled)", *CATEGORIES, "matmul + attention"]
    body, overlapping = [], []
    for side, p in profiles.items():
        clocks = [("self CPU", "self_cpu_us", False)]
        if side != "cpu":
            clocks.append(("device", "device_us", True))
        for label, field, kernel in clocks:
            rows = [r for r in p["rows"] if r["kernel"] == kernel]
            total = sum(r[field] for r in rows) or math.inf
            share = {c: sum(r[field] for r in rows if r["category"] == c) / total
                     for c in CATEGORIES}
            if kernel and total > 1.05 * p["wall_s"] * 1e6:
                overlapping.append(side)
            body.append([side, f"{label} {total / 1e3:.2f} ms", duration(p["wall_s"]),
                         *(f"{share[c]:.0%}" for c in CATEGORIES),
                         f"{share['matmul'] + share['attention softmax']:.0%}"])
    text = render(header, body, markdown)
    if overlapping:
        text += (f"\n\nThe device's kernel activities add up to more than the step in "
                 f"{', '.join(overlapping)}: some overlap (a kernel's recorded span includes a "
                 f"wait for queued work).")
    return text


def top_ops(side: str, profile: dict, markdown: bool, top: int = 12) -> str:
    ops = [r for r in profile["rows"] if not r["kernel"]]
    total = sum(r["self_cpu_us"] for r in ops) or math.inf
    body = [[r["op"], r["category"], str(r["calls"]), duration(r["self_cpu_us"] / 1e6),
             f"{r['self_cpu_us'] / total:.1%}",
             duration(r["device_us"] / 1e6) if side != "cpu" else "-"]
            for r in sorted(ops, key=lambda r: -r["self_cpu_us"])[:top]]
    return (f"{side}: top {top} ops by self CPU time (per step)\n\n"
            + render(["op", "category", "calls", "self CPU", "share", "device"], body, markdown))


def profile_report(args: argparse.Namespace) -> None:
    profiles = profile_all(args)
    sizes = TINY_SIZES if args.tiny else DEFAULT_SIZES
    print(f"Decoder block training step ({sizes.batch}x{sizes.seq}, dim {sizes.dim}, "
          f"{sizes.heads} heads, ffn {sizes.ffn}) under torch.profiler, {args.threads} "
          f"intra-op threads; the median of {PROFILED_STEPS} profiled steps. load average "
          f"{os.getloadavg()[0]:.2f}.\n")
    print(profile_split(profiles, args.markdown))
    for side, p in profiles.items():
        print("\n" + top_ops(side, p, args.markdown))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="intra-op threads on every side (1 is steadier on a busy machine)")
    parser.add_argument("--profile", action="store_true",
                        help="profile the decoder block on every side instead of timing")
    parser.add_argument("--markdown", action="store_true",
                        help="print the settings and Markdown tables (for docs/performance.md)")
    parser.add_argument("--tiny", action="store_true",
                        help="tiny sizes and few calls per batch: a smoke run, not a measure")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # a side's process (internal)
    args = parser.parse_args()
    if args.worker:
        serve(args.worker, args.threads, TINY_SIZES if args.tiny else DEFAULT_SIZES)
    elif args.profile:
        profile_report(args)
    else:
        load_before = os.getloadavg()[0]
        report(*measure(args), args, load_before)


if __name__ == "__main__":
    main()
