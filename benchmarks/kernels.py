"""The kernel library (torchneuron.kernels): each op's eager fast path on neuron against the plain
PyTorch composite it replaces (the library's reference, what a model runs without the library) on
neuron and on the CPU in the same process, forward and backward together, in time and in peak
memory; a tiny and a small Llama training step untouched and after `kernels.apply(model)`; then
the NKI simulator's cost per kernel and each kernel's estimated Trainium time.

Every comparison runs its sides in paired, alternating rounds in one process (A then B, then B
then A), so both see the same machine load; a figure is the median over the rounds with the
spread (min..max) beside it, and a ratio is the median of the rounds' ratios with their spread.
Both sides run at the same intra-op thread count (1 by default), float32. The small cases are a
tiny Llama's (hidden 64, 24 tokens) and a small Llama's (hidden 512, 1024 tokens) shapes, where a
custom op's per-call cost shows; the large ones show memory and speed at scale. Peak memory is
the most the device allocator held during one call beyond the inputs, for the library's op and
for the composite, both on neuron. The simulator table runs each forward @nki.jit kernel on small
shapes against the composite on the CPU; the estimate (torchneuron.kernels.estimate, trn2, one
NeuronCore) is for the large cases' shapes. A neuron batch ends with torch.neuron.synchronize
(queued work counts, in every eager mode), every call's outputs and gradients are held until its
batch is timed, and the process keeps freed memory (benchmarks/timing.py's keep_freed_memory) so
that the CPU's tensors are not page-faulted anew on every call.
Run: `.venv/bin/python benchmarks/kernels.py [--rounds 7] [--threads 1] [--markdown]
[--only small,large,model,simulator]` from the repository root.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from timing import finish_for, keep_freed_memory, median, seconds_per_call, settings

from torchneuron.kernels import library as kl
from torchneuron.kernels.library.attention import attention_forward_kernel
from torchneuron.kernels.library.cross_entropy import chunk_stats_kernel
from torchneuron.kernels.library.estimate import TABLE_HEADER
from torchneuron.kernels.library.rms_norm import rms_norm_kernel
from torchneuron.kernels.library.rope import rope_kernel
from torchneuron.kernels.library.router import router_topk_kernel
from torchneuron.kernels.library.swiglu import swiglu_forward_kernel


def _randn(*shape, scale=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape))) * scale


def _targets(rows, vocab):
    return torch.randint(0, vocab, (rows,), generator=torch.Generator().manual_seed(1))


def _router(fn):
    return lambda x, w, k: fn(x, w, k)[:2]


# name -> (inputs on the CPU, the library op, the composite, differentiable input positions,
#          the forward kernel and its arguments for the estimate)
def large_cases() -> dict:
    x_norm, w_norm = _randn(8, 1024, 2048), 1 + 0.1 * _randn(2048)
    q, k = _randn(4, 32, 1024, 128), _randn(4, 8, 1024, 128)
    angles = _randn(4, 1024, 64).repeat(1, 1, 2)
    cos, sin = angles.cos(), angles.sin()
    x_mlp = _randn(2048, 1024)
    w_gate, w_up, w_down = _randn(2816, 1024, scale=0.03), _randn(2816, 1024, scale=0.03), \
        _randn(1024, 2816, scale=0.02)
    aq, akv = _randn(1, 8, 4096, 64), _randn(1, 2, 4096, 64)
    hidden, lm_head = _randn(2048, 512), _randn(32000, 512, scale=0.04)
    logits = hidden @ lm_head.T
    target = _targets(2048, 32000)
    x_router, w_router = _randn(8192, 1024), _randn(8, 1024, scale=0.03)
    return {
        "rms_norm 8x1024x2048": (
            [x_norm, w_norm], kl.rms_norm, kl.rms_norm_reference, (0, 1),
            (rms_norm_kernel, (x_norm.reshape(-1, 2048), w_norm, 1e-6))),
        "rope q 4x32x1024x128, k 8 heads": (
            [q, k, cos, sin], kl.rope, kl.rope_reference, (0, 1),
            (rope_kernel, (q.reshape(-1, 1024, 128), k.reshape(-1, 1024, 128), cos, sin))),
        "swiglu_mlp 2048x1024, 2816": (
            [x_mlp, w_gate, w_up, w_down], kl.swiglu_mlp, kl.swiglu_mlp_reference, (0, 1, 2, 3),
            (swiglu_forward_kernel, (x_mlp, w_gate, w_up, w_down))),
        "attention causal seq 4096, 8 heads (2 kv), d 64": (
            [aq, akv, akv.clone()], kl.attention, kl.attention_reference, (0, 1, 2),
            (attention_forward_kernel, (aq[0], akv[0], akv[0], 0.125, True))),
        "cross_entropy 2048 rows, vocab 32000 from hidden 512": (
            [hidden, target, lm_head], kl.cross_entropy, kl.cross_entropy_reference, (0, 2),
            (chunk_stats_kernel, (logits, target.float()[:, None], 0))),
        "cross_entropy 2048 rows from logits, vocab 32000": (
            [logits, target], kl.cross_entropy, kl.cross_entropy_reference, (0,),
            (chunk_stats_kernel, (logits, target.float()[:, None], 0))),
        "router_topk 8192 tokens, 8 experts, k 2": (
            [x_router, w_router, 2], _router(kl.router_topk), _router(kl.router_topk_reference),
            (0, 1), (router_topk_kernel, (x_router, w_router, 2))),
    }


# The shapes of the two Llamas of the model case: (tokens, hidden, intermediate, heads, kv heads,
# batch, seq, vocab).
LLAMAS = {"tiny": (24, 64, 80, 4, 2, 2, 12, 96), "small": (1024, 512, 1408, 8, 2, 4, 256, 8000)}


def small_cases() -> dict:
    """Every op at the tiny and the small Llama's shapes: where a per-call cost would show."""
    out = {}
    for size, (rows, hidden, inter, heads, kv, batch, seq, vocab) in LLAMAS.items():
        d = hidden // heads
        angles = _randn(batch, seq, d // 2).repeat(1, 1, 2)
        x = _randn(rows, hidden)
        target = _targets(rows, vocab)
        out.update({
            f"rms_norm {rows}x{hidden} ({size})": (
                [x, 1 + 0.1 * _randn(hidden)], kl.rms_norm, kl.rms_norm_reference, (0, 1)),
            f"rope q {batch}x{heads}x{seq}x{d}, k {kv} heads ({size})": (
                [_randn(batch, heads, seq, d), _randn(batch, kv, seq, d), angles.cos(),
                 angles.sin()], kl.rope, kl.rope_reference, (0, 1)),
            f"swiglu_mlp {rows}x{hidden}, {inter} ({size})": (
                [x, _randn(inter, hidden, scale=0.05), _randn(inter, hidden, scale=0.05),
                 _randn(hidden, inter, scale=0.05)], kl.swiglu_mlp, kl.swiglu_mlp_reference,
                (0, 1, 2, 3)),
            f"attention causal {batch}x{heads}x{seq}x{d}, {kv} kv ({size})": (
                [_randn(batch, heads, seq, d), _randn(batch, kv, seq, d),
                 _randn(batch, kv, seq, d)], kl.attention, kl.attention_reference, (0, 1, 2)),
            f"cross_entropy {rows}x{vocab} from logits ({size})": (
                [_randn(rows, vocab), target], kl.cross_entropy, kl.cross_entropy_reference,
                (0,)),
            f"cross_entropy {rows} rows from hidden {hidden}, vocab {vocab} ({size})": (
                [x, target, _randn(vocab, hidden, scale=0.05)], kl.cross_entropy,
                kl.cross_entropy_reference, (0, 2)),
            f"router_topk {rows} tokens, hidden {hidden}, 8 experts, k 2 ({size})": (
                [x, _randn(8, hidden, scale=0.05), 2], _router(kl.router_topk),
                _router(kl.router_topk_reference), (0, 1)),
        })
    return out


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def fwd_bwd(fn, inputs, differentiable, device):
    """A call of fn's forward and backward (every output summed) on `device`; it returns the
    outputs and the gradients, for the timing to hold."""
    # Detached: leaves of this call's own, so that a case sharing an input with another never
    # makes one a non-leaf copy whose gradient flows back into the other's (a device-to-CPU copy
    # inside the neuron timing) and leaves .grad unset.
    args = [t.detach().to(device).requires_grad_(i in differentiable)
            if isinstance(t, torch.Tensor) else t for i, t in enumerate(inputs)]

    def call():
        for i in differentiable:
            args[i].grad = None
        outs = [o for o in _outputs(fn(*args)) if o.is_floating_point()]
        torch.autograd.backward([o.float().sum() for o in outs])
        return [o.detach() for o in outs], [args[i].grad for i in differentiable]
    return call


def peak_bytes(call) -> int:
    """The device allocator's peak during one call, above what was held before it."""
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    result = call()
    torch.neuron.synchronize()  # the peak of the work the call queued
    del result
    return torch.neuron.max_memory_allocated() - base


def spread(values: list[float]) -> tuple[float, float, float]:
    return median(values), min(values), max(values)


ROUND_S = 0.2  # a round of a fast call repeats it for about this long, so a round is not one tick


def paired(calls: dict, rounds: int, devices: dict) -> dict[str, list[float]]:
    """Seconds per call of each of `calls` in each round; the calls alternate within a round and
    their order flips from round to round, so every side sees the same machine load. A batch of
    a call on `devices[name]` ends when that device has run it, its results held until then."""
    numbers, finish = {}, {name: finish_for(devices[name]) for name in calls}

    def timed(name: str, number: int) -> float:
        return seconds_per_call(calls[name], number, finish=finish[name], keep_results=True)

    for name, call in calls.items():
        timed(name, 1)  # warm-up: first-call costs
        numbers[name] = max(1, int(ROUND_S / max(timed(name, 1), 1e-6)))
    times = {name: [] for name in calls}
    order = list(calls)
    for _ in range(rounds):
        for name in order:
            times[name].append(timed(name, numbers[name]))
        order.reverse()
    return times


def ratios(numerator: list[float], denominator: list[float]) -> tuple[float, float, float]:
    """The rounds' ratios numerator/denominator: median, min, max."""
    return spread([a / b for a, b in zip(numerator, denominator)])


def measure_ops(cases: dict, rounds: int, large: bool):
    """Per case: the op on neuron, the composite on neuron and on the CPU, paired; for the large
    cases also peak memory and the forward kernel's estimate."""
    rows = []
    for name, (inputs, op, composite, diff, *kernel) in cases.items():
        calls = {"op": fwd_bwd(op, inputs, diff, "neuron"),
                 "composite": fwd_bwd(composite, inputs, diff, "neuron"),
                 "cpu": fwd_bwd(composite, inputs, diff, "cpu")}
        times = paired(calls, rounds, {"op": "neuron", "composite": "neuron", "cpu": "cpu"})
        row = dict(name=name, op=spread(times["op"]), composite=spread(times["composite"]),
                   cpu=spread(times["cpu"]), gain=ratios(times["composite"], times["op"]),
                   cpu_gain=ratios(times["cpu"], times["op"]))
        if large:
            row["mem_op"], row["mem_composite"] = peak_bytes(calls["op"]), \
                peak_bytes(calls["composite"])
            kernel_fn, kernel_args = kernel[0]
            est = kl.estimate(kernel_fn, *kernel_args, profile="trn2")
            est.name = f"{est.name}: {name}"
            row["estimate"] = est
        rows.append(row)
    return rows


def measure_model(rounds: int):
    """The tiny and the small Llama's training step (forward, loss, backward) on neuron,
    untouched and after apply, paired."""
    import copy

    from transformers import LlamaConfig, LlamaForCausalLM

    results = {}
    for size, (_, hidden, inter, heads, kv, batch, seq, vocab) in LLAMAS.items():
        config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                             num_hidden_layers=2 if size == "tiny" else 4,
                             num_attention_heads=heads, num_key_value_heads=kv,
                             max_position_embeddings=max(64, seq), attn_implementation="sdpa")
        torch.manual_seed(0)
        untouched = LlamaForCausalLM(config).to("neuron")
        applied = copy.deepcopy(untouched)
        kl.apply(applied)
        ids = torch.randint(0, vocab, (batch, seq),
                            generator=torch.Generator().manual_seed(0)).to("neuron")

        def step(model):
            def call():
                model.zero_grad(set_to_none=True)
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                return loss.detach()
            return call
        times = paired({"untouched": step(untouched), "applied": step(applied)}, rounds,
                       {"untouched": "neuron", "applied": "neuron"})
        results[size] = dict(config=config, tokens=(batch, seq),
                             untouched=spread(times["untouched"]),
                             applied=spread(times["applied"]),
                             gain=ratios(times["untouched"], times["applied"]))
    return results


def simulator_cases() -> dict:
    x, w = _randn(256, 512), _randn(512)
    q, k = _randn(1, 4, 256, 64), _randn(1, 2, 256, 64)
    angles = _randn(1, 256, 32).repeat(1, 1, 2)
    xm, wg, wu, wd = _randn(128, 256), _randn(384, 256, scale=0.06), \
        _randn(384, 256, scale=0.06), _randn(256, 384, scale=0.05)
    logits, target = _randn(256, 2048), torch.randint(0, 2048, (256,))
    xr, wr = _randn(512, 256), _randn(8, 256)
    return {
        "rms_norm_kernel 256x512": (lambda a: rms_norm_kernel(a[0], a[1], 1e-6), [x, w],
                                    lambda: kl.rms_norm_reference(x, w)),
        "rope_kernel q 4x256x64, k 2 heads": (
            lambda a: rope_kernel(a[0].reshape(-1, 256, 64), a[1].reshape(-1, 256, 64), a[2],
                                  a[3]), [q, k, angles.cos(), angles.sin()],
            lambda: kl.rope_reference(q, k, angles.cos(), angles.sin())),
        "swiglu_forward_kernel 128x256, 384": (
            lambda a: swiglu_forward_kernel(*a), [xm, wg, wu, wd],
            lambda: kl.swiglu_mlp_reference(xm, wg, wu, wd)),
        "attention_forward_kernel causal 4x256x64, 2 kv": (
            lambda a: attention_forward_kernel(a[0][0], a[1][0], a[1][0], 0.125, True), [q, k],
            lambda: kl.attention_reference(q, k, k)),
        "chunk_stats_kernel 256x2048": (
            lambda a: chunk_stats_kernel(a[0], a[1], 0), [logits, target.float()[:, None]],
            lambda: torch.nn.functional.cross_entropy(logits, target)),
        "router_topk_kernel 512x256, 8 experts": (
            lambda a: router_topk_kernel(a[0], a[1], 2), [xr, wr],
            lambda: kl.router_topk_reference(xr, wr, 2)),
    }


def measure_simulator(rounds: int):
    rows = []
    for name, (kernel_call, inputs, composite) in simulator_cases().items():
        args = [t.to("neuron") for t in inputs]

        def simulated():
            return kernel_call(args)
        times = paired({"simulator": simulated, "cpu": composite}, rounds,
                       {"simulator": "neuron", "cpu": "cpu"})
        rows.append((name, spread(times["simulator"]), spread(times["cpu"]),
                     ratios(times["simulator"], times["cpu"])))
    return rows


def _ms(t):
    return f"{t * 1e3:.2f}"


def _mib(b):
    return f"{b / (1 << 20):.0f}"


def _time(t):
    return f"{_ms(t[0])} ({_ms(t[1])}..{_ms(t[2])})"


def _ratio(r):
    return f"{r[0]:.2f}x ({r[1]:.2f}..{r[2]:.2f})"


def _llama(config, tokens):
    return (f"{config.num_hidden_layers} layers, hidden {config.hidden_size}, "
            f"{config.num_attention_heads} heads / {config.num_key_value_heads} kv, vocab "
            f"{config.vocab_size}, batch {tokens[0]} x {tokens[1]} tokens")


OP_HEADER = ("| op (forward + backward) | op on neuron, ms | composite on neuron, ms | "
             "composite / op, neuron | composite on CPU, ms | CPU / op |")


def _op_rows(rows, large):
    print(OP_HEADER + (" peak MiB: op | peak MiB: composite |" if large else ""))
    print("|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if large else ""))
    for r in rows:
        line = (f"| {r['name']} | {_time(r['op'])} | {_time(r['composite'])} | "
                f"{_ratio(r['gain'])} | {_time(r['cpu'])} | {_ratio(r['cpu_gain'])} |")
        if large:
            line += f" {_mib(r['mem_op'])} | {_mib(r['mem_composite'])} |"
        print(line)


def report_markdown(results, rounds) -> None:
    print(f"{settings()} at the end, median of {rounds} paired rounds (min..max).\n")
    if "model" in results:
        print("A Llama training step (forward, loss, backward) on neuron, untouched and after "
              "`kernels.apply(model)`:\n")
        print("| model | untouched, ms | applied, ms | untouched / applied |\n|---|---:|---:|---:|")
        for size, m in results["model"].items():
            print(f"| {size}: {_llama(m['config'], m['tokens'])} | {_time(m['untouched'])} | "
                  f"{_time(m['applied'])} | {_ratio(m['gain'])} |")
        print()
    if "small" in results:
        print("Each op at the tiny and the small Llama's shapes (composite / op above 1: the "
              "library is faster):\n")
        _op_rows(results["small"], large=False)
        print()
    if "large" in results:
        print("Each op at large shapes:\n")
        _op_rows(results["large"], large=True)
        print("\nEstimated Trainium time of each op's forward kernel at those shapes (trn2, one "
              "NeuronCore; per engine, microseconds):\n")
        print(TABLE_HEADER)
        for r in results["large"]:
            print(r["estimate"].table_row())
        print()
    if "simulator" in results:
        print("The NKI simulator, each forward kernel on small shapes:\n")
        print("| kernel | simulator, ms | composite on CPU, ms | simulator / CPU |")
        print("|---|---:|---:|---:|")
        for name, sim, cpu, ratio in results["simulator"]:
            print(f"| {name} | {_time(sim)} | {_time(cpu)} | {ratio[0]:.0f}x "
                  f"({ratio[1]:.0f}..{ratio[2]:.0f}) |")


def report_text(results, rounds) -> None:
    print(f"{settings()} at the end, rounds={rounds}")
    for size, m in results.get("model", {}).items():
        print(f"Llama {size} step: untouched {_time(m['untouched'])} ms, applied "
              f"{_time(m['applied'])} ms, untouched/applied {_ratio(m['gain'])}")
    for r in results.get("small", []) + results.get("large", []):
        memory = (f"; peak MiB op {_mib(r['mem_op'])}, composite {_mib(r['mem_composite'])}; "
                  f"trn2 estimate {r['estimate'].seconds * 1e6:.1f} us "
                  f"({r['estimate'].bound})") if "estimate" in r else ""
        print(f"{r['name']}: op {_time(r['op'])} ms, composite on neuron {_time(r['composite'])} "
              f"ms ({_ratio(r['gain'])}), CPU {_time(r['cpu'])} ms ({_ratio(r['cpu_gain'])})"
              f"{memory}")
    for name, sim, cpu, ratio in results.get("simulator", []):
        print(f"simulator {name}: {_time(sim)} ms, CPU {_time(cpu)} ms, {ratio[0]:.0f}x")


SECTIONS = ("model", "small", "large", "simulator")


def main() -> None:
    keep_freed_memory()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads for all sides")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections among {', '.join(SECTIONS)}")
    args = parser.parse_args()
    chosen = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"--only: unknown section(s) {', '.join(unknown)}; choose among "
                     f"{', '.join(SECTIONS)}")
    torch.set_num_threads(args.threads)
    measures = {"model": lambda: measure_model(args.rounds),
                "small": lambda: measure_ops(small_cases(), args.rounds, large=False),
                "large": lambda: measure_ops(large_cases(), args.rounds, large=True),
                "simulator": lambda: measure_simulator(args.rounds)}
    results = {name: measures[name]() for name in SECTIONS if name in chosen}
    (report_markdown if args.markdown else report_text)(results, args.rounds)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - start:.1f} s)", file=sys.stderr)
