"""The kernel library (torchneuron.kernels): each op's fast path on neuron against the plain
PyTorch composite (the library's reference, what a model runs without the library) on the CPU in
the same process, forward and backward together, in time and in peak memory; then the NKI
simulator's cost per kernel and each kernel's estimated Trainium time.

Times are seconds per forward+backward call, median of the rounds with the spread (min..max)
beside it; both sides run at the same intra-op thread count, float32. Peak memory is the most the
device allocator held during one call beyond the inputs, for the library's op and for the same
composite run on neuron (the CPU has no allocator statistics; the composite allocates the same
tensors on either device). A Llama training step on neuron, untouched and after
`kernels.apply(model)`, shows what the library costs or gains inside a model. The simulator
table runs each forward @nki.jit kernel on small shapes against the composite on the CPU; the
estimate (torchneuron.kernels.estimate, trn2, one NeuronCore) is for the first table's shapes.
Run: `.venv/bin/python benchmarks/kernels.py [--rounds 3] [--threads 2] [--markdown]` from the
repository root.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from timing import median, seconds_per_call

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


# name -> (inputs on the CPU, the library op, the composite, differentiable input positions,
#          the forward kernel and its arguments for the estimate)
def cases() -> dict:
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
    target = torch.randint(0, 32000, (2048,), generator=torch.Generator().manual_seed(1))
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
            [x_router, w_router, 2], lambda x, w, k: kl.router_topk(x, w, k)[:2],
            lambda x, w, k: kl.router_topk_reference(x, w, k)[:2], (0, 1),
            (router_topk_kernel, (x_router, w_router, 2))),
    }


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def fwd_bwd(fn, inputs, differentiable, device):
    """A call of fn's forward and backward (every output summed) on `device`."""
    args = [t.to(device).requires_grad_(i in differentiable) if isinstance(t, torch.Tensor)
            else t for i, t in enumerate(inputs)]

    def call():
        for i in differentiable:
            args[i].grad = None
        outs = [o for o in _outputs(fn(*args)) if o.is_floating_point()]
        torch.autograd.backward([o.float().sum() for o in outs])
        if device == "neuron":
            torch.neuron.synchronize()
    return call


def peak_bytes(call) -> int:
    """The device allocator's peak during one call, above what was held before it."""
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    call()
    return torch.neuron.max_memory_allocated() - base


def spread(times: list[float]) -> tuple[float, float, float]:
    return median(times), min(times), max(times)


def measure(rounds: int):
    rows = []
    for name, (inputs, op, composite, diff, (kernel, kargs)) in cases().items():
        fast = fwd_bwd(op, inputs, diff, "neuron")
        cpu = fwd_bwd(composite, inputs, diff, "cpu")
        fast(), cpu()  # warm-up: first-call costs
        t_fast, t_cpu = [], []
        for _ in range(rounds):  # interleaved, so both see the same machine load
            t_fast.append(seconds_per_call(fast, 1))
            t_cpu.append(seconds_per_call(cpu, 1))
        mem_fast = peak_bytes(fast)
        mem_composite = peak_bytes(fwd_bwd(composite, inputs, diff, "neuron"))
        estimate = kl.estimate(kernel, *kargs, profile="trn2")
        estimate.name = f"{estimate.name}: {name}"
        rows.append((name, spread(t_fast), spread(t_cpu), mem_fast, mem_composite, estimate))
    return rows


def measure_model(rounds: int):
    """A Llama training step (forward, loss, backward) on neuron, untouched and applied."""
    import copy

    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=8000, hidden_size=512, intermediate_size=1408,
                         num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                         max_position_embeddings=512, attn_implementation="sdpa")
    torch.manual_seed(0)
    untouched = LlamaForCausalLM(config).to("neuron")
    applied = copy.deepcopy(untouched)
    kl.apply(applied)
    ids = torch.randint(0, 8000, (4, 256), generator=torch.Generator().manual_seed(0))
    ids = ids.to("neuron")

    def step(model):
        def call():
            model.zero_grad(set_to_none=True)
            model(input_ids=ids, labels=ids).loss.backward()
            torch.neuron.synchronize()
        return call
    calls = {"untouched": step(untouched), "applied": step(applied)}
    times = {name: [] for name in calls}
    for call in calls.values():
        call()
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(seconds_per_call(call, 1))
    return {name: spread(t) for name, t in times.items()}


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
            kernel_call(args)
            torch.neuron.synchronize()
        simulated(), composite()
        t_sim, t_cpu = [], []
        for _ in range(rounds):
            t_sim.append(seconds_per_call(simulated, 1))
            t_cpu.append(seconds_per_call(composite, 1))
        rows.append((name, spread(t_sim), spread(t_cpu)))
    return rows


def _ms(t):
    return f"{t * 1e3:.2f}"


def _mib(b):
    return f"{b / (1 << 20):.0f}"


def report(rows, model, sim_rows, markdown: bool, rounds: int) -> None:
    if markdown:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {rounds} "
              f"rounds (min..max), load average {os.getloadavg()[0]:.2f} at the end.\n")
        print("| op (forward + backward) | fast path on neuron, ms | composite on CPU, ms | "
              "CPU / neuron | peak MiB: op | peak MiB: composite |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, (fm, flo, fhi), (cm, clo, chi), mf, mc, _ in rows:
            print(f"| {name} | {_ms(fm)} ({_ms(flo)}..{_ms(fhi)}) | {_ms(cm)} ({_ms(clo)}.."
                  f"{_ms(chi)}) | {cm / fm:.2f}x | {_mib(mf)} | {_mib(mc)} |")
        (um, ulo, uhi), (am, alo, ahi) = model["untouched"], model["applied"]
        print("\nLlama (4 layers, hidden 512, 8 heads / 2 kv, vocab 8000) training step, batch "
              "4 x 256 tokens, on neuron:\n")
        print("| model | step, ms | untouched / applied |\n|---|---:|---:|")
        print(f"| untouched | {_ms(um)} ({_ms(ulo)}..{_ms(uhi)}) | |")
        print(f"| kernels.apply(model) | {_ms(am)} ({_ms(alo)}..{_ms(ahi)}) | {um / am:.2f}x |")
        print("\nEstimated Trainium time of each op's forward kernel at those shapes (trn2, one "
              "NeuronCore; per engine, microseconds):\n")
        print(TABLE_HEADER)
        for *_, est in rows:
            print(est.table_row())
        print("\nThe NKI simulator, each forward kernel on small shapes:\n")
        print("| kernel | simulator, ms | composite on CPU, ms | simulator / CPU |")
        print("|---|---:|---:|---:|")
        for name, (sm, slo, shi), (cm, clo, chi) in sim_rows:
            print(f"| {name} | {_ms(sm)} ({_ms(slo)}..{_ms(shi)}) | {_ms(cm)} ({_ms(clo)}.."
                  f"{_ms(chi)}) | {sm / cm:.0f}x |")
        return
    print(f"threads={torch.get_num_threads()} rounds={rounds}")
    for name, (fm, flo, fhi), (cm, clo, chi), mf, mc, est in rows:
        print(f"{name}: neuron fast {_ms(fm)} ms ({_ms(flo)}..{_ms(fhi)}), CPU composite "
              f"{_ms(cm)} ms ({_ms(clo)}..{_ms(chi)}), CPU/neuron {cm / fm:.2f}x; peak MiB op "
              f"{_mib(mf)}, composite {_mib(mc)}; trn2 estimate {est.seconds * 1e6:.1f} us "
              f"({est.bound})")
    print(f"Llama step on neuron: untouched {_ms(model['untouched'][0])} ms, applied "
          f"{_ms(model['applied'][0])} ms")
    for name, (sm, slo, shi), (cm, clo, chi) in sim_rows:
        print(f"simulator {name}: {_ms(sm)} ms ({_ms(slo)}..{_ms(shi)}), CPU {_ms(cm)} ms, "
              f"{sm / cm:.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="intra-op threads for both sides")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = measure(args.rounds)
    model = measure_model(args.rounds)
    sim_rows = measure_simulator(args.rounds)
    report(rows, model, sim_rows, args.markdown, args.rounds)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - start:.1f} s)", file=sys.stderr)
