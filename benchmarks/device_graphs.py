"""Device graphs (docs/device-graphs.md): a step captured once with torch.neuron.graph and
replayed, against the same step in native CPU eager and in neuron eager, in the same rounds.

Cases (issue 56): a step of 12 small matmul+pointwise layers at batch 1 (nn.Linear and ReLU; the
same with GELU, whose CPU kernel alone takes about 10 us at this size, shows where a graph stops
helping: it removes what surrounds kernels, not the kernels), and a tiny Llama-style decode step
with a static KV cache (preallocated, the position a tensor, as Hugging Face's StaticCache and
vLLM keep it). Targets: replay at least 2x faster than CPU eager for the ReLU layers and the
decode step. Every
neuron batch ends with torch.neuron.synchronize() (the clock stops once the device ran the
replays), every call's result is held until its batch is timed (timing.py), and both sides run
the same ops under torch.no_grad on one thread. The kernel share is the replay's device time
spent in the recorded ops' kernels (torch.profiler's neuron activities) over its step time.

The second table is torch.compile (issue 57): the ReLU layers compiled with backend="neuron" in
mode="default" and in mode="reduce-overhead" (each compiled graph replayed from a device graph,
docs/compile.md), against the same CPU eager step, in the same rounds.
Run: `.venv/bin/python benchmarks/device_graphs.py [--rounds 7] [--threads 1]` from the
repository root.
"""

from __future__ import annotations

import math
import statistics

import torch
from timing import finish_for, print_table, seconds_per_call, settings, standard_arguments

import torchneuron  # noqa: F401  (registers the device)


def mlp_step(device: str, activation: type[torch.nn.Module] = torch.nn.ReLU, layers: int = 12,
             width: int = 64):
    """12 layers of nn.Linear then an activation, batch 1, as a model is written: small ops, so
    what each op costs besides its kernel (Python, modules, the dispatcher) dominates."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(layers)
                                  for m in (torch.nn.Linear(width, width), activation())])
    model = model.to(device)
    x = torch.randn(1, width).to(device)

    def step() -> torch.Tensor:
        return model(x)

    return step, x


def gelu_mlp_step(device: str):
    return mlp_step(device, torch.nn.GELU)


class TinyLlamaDecode:
    """One decode step of a 2-layer Llama-style decoder (RMSNorm, rotary, grouped attention over
    a preallocated KV cache, SwiGLU MLP), the position a 1-element tensor: the same ops at every
    position, so one captured step serves every position."""

    def __init__(self, device: str, layers: int = 2, dim: int = 64, heads: int = 4,
                 kv_heads: int = 2, hidden: int = 172, vocab: int = 256, max_len: int = 128):
        gen = torch.Generator().manual_seed(0)

        def p(*shape):
            return (torch.randn(*shape, generator=gen) / math.sqrt(shape[-1])).to(device)

        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.max_len = max_len
        self.embed = p(vocab, dim)
        self.layers = [dict(wq=p(dim, dim), wk=p(kv_heads * self.head_dim, dim),
                            wv=p(kv_heads * self.head_dim, dim), wo=p(dim, dim),
                            w1=p(hidden, dim), w3=p(hidden, dim), w2=p(dim, hidden),
                            n1=torch.ones(dim, device=device), n2=torch.ones(dim, device=device))
                       for _ in range(layers)]
        self.norm = torch.ones(dim, device=device)
        self.head = p(vocab, dim)
        self.k_cache = [torch.zeros(1, kv_heads, max_len, self.head_dim, device=device)
                        for _ in range(layers)]
        self.v_cache = [torch.zeros(1, kv_heads, max_len, self.head_dim, device=device)
                        for _ in range(layers)]
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(max_len).float(), inv)
        self.cos = torch.cat([angles.cos(), angles.cos()], -1).to(device)
        self.sin = torch.cat([angles.sin(), angles.sin()], -1).to(device)
        self.positions = torch.arange(max_len, device=device)
        self.token = torch.zeros(1, 1, dtype=torch.long, device=device)
        self.pos = torch.zeros(1, dtype=torch.long, device=device)

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    @staticmethod
    def rotate(x, cos, sin):
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    def step(self) -> torch.Tensor:
        h = self.embed[self.token]  # (1, 1, dim)
        cos = self.cos.index_select(0, self.pos)
        sin = self.sin.index_select(0, self.pos)
        mask = (self.positions <= self.pos).view(1, 1, 1, -1)
        for i, layer in enumerate(self.layers):
            x = self.rms(h, layer["n1"])
            q = (x @ layer["wq"].T).view(1, 1, self.heads, self.head_dim).transpose(1, 2)
            k = (x @ layer["wk"].T).view(1, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            v = (x @ layer["wv"].T).view(1, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
            self.k_cache[i].index_copy_(2, self.pos, k)
            self.v_cache[i].index_copy_(2, self.pos, v)
            attn = torch.nn.functional.scaled_dot_product_attention(
                q, self.k_cache[i], self.v_cache[i], attn_mask=mask, enable_gqa=True)
            h = h + attn.transpose(1, 2).reshape(1, 1, -1) @ layer["wo"].T
            x = self.rms(h, layer["n2"])
            h = h + (torch.nn.functional.silu(x @ layer["w1"].T) * (x @ layer["w3"].T)) @ layer["w2"].T
        logits = self.rms(h, self.norm) @ self.head.T
        self.token.copy_(logits.argmax(-1))
        self.pos.add_(1).remainder_(self.max_len)  # the cache wraps: any number of steps
        return logits


def decode_step(device: str):
    model = TinyLlamaDecode(device)
    return model.step, model


def captured(step):
    """The step captured once (after one eager warm-up run on the capture stream) and replayed."""
    torch.neuron.synchronize()
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        out = step()

    def replay() -> torch.Tensor:
        g.replay()
        return out

    return replay, g


def kernel_share(replay, number: int) -> float:
    """The share of a replayed step's time spent in its kernels (device activities, the
    replay's own span excluded), from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    torch.neuron.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        start = torch.neuron.Event(enable_timing=True)
        end = torch.neuron.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            replay()
        end.record()
        torch.neuron.synchronize()
    total_us = start.elapsed_time(end) * 1e3
    kernels_us = sum(e.device_time_total for e in prof.key_averages()
                     if e.device_time_total and e.key != "NeuronGraph.replay"
                     and not e.key.startswith("Memcpy"))
    return kernels_us / total_us if total_us else float("nan")


def main() -> None:
    args = standard_arguments(__doc__)
    finish = finish_for("neuron")
    before = settings(args.threads)
    rows = []
    with torch.no_grad():
        for name, make, number in (("12 Linear+ReLU layers, batch 1", mlp_step, 200),
                                   ("12 Linear+GELU layers, batch 1", gelu_mlp_step, 200),
                                   ("tiny Llama decode step, static KV cache", decode_step, 100)):
            cpu_step, _ = make("cpu")
            eager_step, _ = make("neuron")
            graph_step, _ = make("neuron")
            cpu_step(), eager_step(), graph_step()  # first calls: signatures seen, caches warm
            torch.neuron.synchronize()
            replay, _graph = captured(graph_step)
            cpu, eager, graph, ratios = [], [], [], []
            for _ in range(args.rounds):
                cpu.append(seconds_per_call(cpu_step, number, keep_results=True))
                eager.append(seconds_per_call(eager_step, number, finish=finish,
                                              keep_results=True))
                graph.append(seconds_per_call(replay, number, finish=finish, keep_results=True))
                ratios.append(cpu[-1] / graph[-1])
            share = kernel_share(replay, number)
            rows.append((name, min(cpu), min(eager), min(graph), statistics.median(ratios),
                         min(ratios), max(ratios), share))
    header = ("case", "CPU eager us", "neuron eager us", "neuron graph us",
              "CPU / graph (median, range)", "kernel share of a replay")
    lines = [(name, f"{c * 1e6:.1f}", f"{e * 1e6:.1f}", f"{g * 1e6:.1f}",
              f"{m:.2f}x ({lo:.2f}-{hi:.2f})", f"{share:.0%}")
             for name, c, e, g, m, lo, hi, share in rows]
    line = (f"Before: {before}. After: {settings(args.threads)}. Best of {args.rounds} rounds "
            "per column; the ratio CPU/graph is taken per round (above 1: the replay is faster)")
    print_table(line, header, lines, args.markdown, (42, 18))
    compile_modes(args, finish)


def compile_modes(args, finish) -> None:
    """The ReLU layers under torch.compile(backend="neuron"), mode="default" against
    mode="reduce-overhead", each against CPU eager in the same rounds."""
    before = settings(args.threads)
    cpu_step, _ = mlp_step("cpu")
    steps = {}
    for mode in ("default", "reduce-overhead"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[m for _ in range(12)
                                      for m in (torch.nn.Linear(64, 64), torch.nn.ReLU())])
        compiled = torch.compile(model.to("neuron"), backend="neuron", mode=mode)
        x = torch.randn(1, 64, device="neuron")
        steps[mode] = (lambda compiled=compiled, x=x: compiled(x))
        with torch.no_grad():
            for _ in range(3):  # compile, warm-up, capture
                steps[mode]()
    times = {mode: [] for mode in ("cpu", *steps)}
    with torch.no_grad():
        for _ in range(args.rounds):
            times["cpu"].append(seconds_per_call(cpu_step, 200, keep_results=True))
            for mode, step in steps.items():
                times[mode].append(seconds_per_call(step, 200, finish=finish, keep_results=True))
    header = ("torch.compile mode", "CPU eager us", "neuron compiled us",
              "CPU / compiled (median, range)")
    lines = []
    for mode in steps:
        ratios = [c / t for c, t in zip(times["cpu"], times[mode])]
        lines.append((f"{mode}, 12 Linear+ReLU layers, batch 1", f"{min(times['cpu']) * 1e6:.1f}",
                      f"{min(times[mode]) * 1e6:.1f}",
                      f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"))
    line = (f"Before: {before}. After: {settings(args.threads)}. Best of {args.rounds} rounds "
            "per column; the ratio is taken per round")
    print()
    print_table(line, header, lines, args.markdown, (42, 18))


if __name__ == "__main__":
    main()
