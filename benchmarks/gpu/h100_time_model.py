"""The GPU side of the time model's check: times, with plain CUDA PyTorch on one GPU, the same
workloads the time model prices on its `h100` profile, and writes them as JSON for
`benchmarks/time_model.py --gpu-results FILE` to set beside the predictions.

Standalone: it needs torch with CUDA, not torchneuron (whose C++ core need not be built on the GPU
machine). The transformer is the time model's own (torchneuron/timemodel/transformer.py, loaded
from its file, with tp=1 its collectives do nothing), so the GPU runs exactly the ops the model
priced, with random bf16 weights. Each workload is timed with CUDA events over `--repeats`
rounds after a warm-up; the JSON holds each round, the report the median and spread.
Run: `python benchmarks/gpu/h100_time_model.py [--out h100.json] [--repeats 10]
[--graphs]` on the GPU machine (`--graphs` replays decode steps as CUDA graphs, the model's
"one compiled graph" mode; without it every op is launched eagerly).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import types

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
TIMEMODEL = ROOT / "torchneuron" / "timemodel"

# name -> (model, workload, batch, context): the workloads the time model also prices
# (benchmarks/time_model.py reads the same table from this file).
WORKLOADS = {
    "matmul 4096x4096x4096 bf16": ("matmul", 4096, 4096, 4096),
    "matmul 1x4096x14336 bf16 (decode GEMV)": ("matmul", 1, 4096, 14336),
    "matmul 8192x8192x28672 bf16": ("matmul", 8192, 8192, 28672),
    "llama-3-8b decode batch 1 context 2048": ("llama-3-8b", "decode", 1, 2048),
    "llama-3-8b decode batch 32 context 2048": ("llama-3-8b", "decode", 32, 2048),
    "llama-3-8b prefill batch 1 prompt 2048": ("llama-3-8b", "prefill", 1, 2048),
}


def load_transformer():
    """torchneuron/timemodel/transformer.py and trace.py as a package of their own."""
    package = types.ModuleType("timemodel_standalone")
    package.__path__ = [str(TIMEMODEL)]
    sys.modules[package.__name__] = package
    for name in ("trace", "transformer"):
        spec = importlib.util.spec_from_file_location(f"{package.__name__}.{name}",
                                                      TIMEMODEL / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules[f"{package.__name__}.transformer"]


def time_ms(step, repeats: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        rounds.append(start.elapsed_time(end))
    return rounds


def matmul_step(m: int, k: int, n: int, device: str = "cuda"):
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
    return lambda: a @ b


def transformer_step(tf, model_name, workload: str, batch: int, context: int, graphs: bool,
                     device: str = "cuda"):
    """One step of the model (a CONFIGS name or a TransformerConfig) as a callable."""
    cfg = tf.config_named(model_name) if isinstance(model_name, str) else model_name
    with torch.device(device):
        model = tf.RankModel(cfg, tp=1).eval()
        if workload == "decode":
            shape = (batch, model.layers[0].kv_heads, context, cfg.head_dim)
            caches = [(torch.zeros(shape, dtype=torch.bfloat16),
                       torch.zeros(shape, dtype=torch.bfloat16)) for _ in model.layers]
            tokens = torch.zeros(batch, 1, dtype=torch.long)
            position = torch.tensor([context - 1])
        else:
            tokens = torch.zeros(batch, context, dtype=torch.long)

    def step():
        with torch.no_grad():
            if workload == "decode":
                return model(tokens, caches, position)
            return model(tokens, last_only=True)

    if graphs and workload == "decode":
        step()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        return graph.replay
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("h100_time_model.json"))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--graphs", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this script times the GPU side of the time model's check")
    tf = load_transformer()
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "graphs": args.graphs, "workloads": {}}
    for name, spec in WORKLOADS.items():
        if spec[0] == "matmul":
            step = matmul_step(*spec[1:])
        else:
            step = transformer_step(tf, *spec, graphs=args.graphs)
        rounds = time_ms(step, args.repeats)
        results["workloads"][name] = rounds
        print(f"{name:44s} median {statistics.median(rounds):9.3f} ms  "
              f"({min(rounds):.3f}..{max(rounds):.3f})")
        del step
        torch.cuda.empty_cache()
    args.out.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out} ({results['device']})")


if __name__ == "__main__":
    main()
