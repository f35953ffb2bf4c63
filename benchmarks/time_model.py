"""The Trainium time model (torchneuron.timemodel) against published Trainium figures: for each
case, the model's prediction at the published configuration, the published value, their ratio
(predicted / published) and the source, then the median absolute error and the worst ratio, per
class of workload and over all cases.

Cases: the Neuron documentation's Trn1 inference tables (transformers-neuronx, time to first
token and per-token latency at batch 1, tensor parallel 32), NxD Inference's Trn2 tutorials (vLLM
on Neuron, Llama-3.3-70B and Llama-3.1-405B at tensor parallel 64, LNC=2, sequence parallel), the
NKI Mamba tutorial's kernel timings (Trainium1, one NeuronCore) and the Trn1 training table
(NxD Training). A decode case's context is the mean over its output: input + output / 2. What
each class leaves out is in docs/time-model.md. Nothing is timed here: the predictions are
deterministic, the only time printed is how long tracing took on this machine.
`--gpu-results FILE` sets the model's `h100` predictions beside what
benchmarks/gpu/h100_time_model.py measured on a GPU (its JSON), the check of the model against a
real GPU's step time.
Run: `.venv/bin/python benchmarks/time_model.py [--markdown] [--only CLASS]
[--gpu-results FILE]` from the repository root.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import pathlib
import statistics
import time
from dataclasses import dataclass
from typing import Callable

from torchneuron.runtime.profiles import MACHINES
from torchneuron.timemodel import Layout, engines, predict

TRN1_TABLE = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/benchmarks/"
              "trn1/trn1-inference-performance.html (about-neuron/benchmarks/trn1/"
              "latency_data_decoder.csv)")
TRN1_TABLE_214 = ("https://awsdocs-neuron.readthedocs-hosted.com/en/v2.14.0/general/benchmarks/"
                  "trn1/trn1-inference-performance.html (trn1_latency_data_LLM.csv)")
TRN2_70B = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/libraries/nxd-inference/"
            "tutorials/trn2-llama3.3-70b-tutorial.html (llama70b_perf_comparison.csv)")
TRN2_405B = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/libraries/nxd-inference/"
             "tutorials/trn2-llama3.1-405b-speculative-tutorial.html "
             "(llama405b_perf_comparison.csv)")
MAMBA = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/tutorials/"
         "fused_mamba.html")
TRN1_TRAIN = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/benchmarks/"
              "trn1/trn1-training-performance.html (training_data_decoder.csv)")


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # the class of workload the summary groups by
    published: float
    unit: str
    source: str
    predict: Callable[[], float]


def _ttft(model, machine, tp, prompt, sp=False, weight_bytes=2.0):
    return lambda: predict(model, machine, Layout(tp, tp=tp), "prefill", 1, prompt,
                           sequence_parallel=sp, weight_bytes=weight_bytes).seconds * 1e3


def _tpot(model, machine, tp, prompt, output, weight_bytes=2.0):
    context = prompt + output // 2
    return lambda: predict(model, machine, Layout(tp, tp=tp), "decode", 1, context,
                           weight_bytes=weight_bytes).seconds * 1e3


def _trn1_rows():
    """(model, input, output, TTFT ms, TPOT ms, weight bytes) of the Trn1 decoder table
    (transformers-neuronx, trn1.32xlarge, TP 32, batch 1, Neuron 2.18)."""
    return [
        ("llama-3-8b", 128, 8064, 17.09, 7.03, 1.0),
        ("llama-3-8b", 4096, 4096, 153.02, 7.04, 1.0),
        ("llama-3-8b", 128, 3968, 14.75, 5.86, 1.0),
        ("llama-3-70b", 2048, 2048, 547.0, 26.2, 2.0),
        ("llama-3-70b", 128, 1024, 53.2, 24.48, 2.0),
        ("llama-3-70b", 128, 128, 52.53, 26.48, 2.0),
        ("llama-2-7b", 128, 8064, 13.32, 6.70, 2.0),
        ("llama-2-13b", 4096, 4096, 864.14, 9.84, 2.0),
        ("llama-2-13b", 8192, 8192, 2367.93, 13.41, 2.0),
        ("llama-2-70b", 128, 128, 53.91, 25.18, 2.0),
        ("llama-2-70b", 256, 256, 81.88, 25.27, 2.0),
        ("llama-2-70b", 128, 1024, 57.75, 25.45, 2.0),
        ("llama-2-70b", 1024, 1024, 232.48, 26.04, 2.0),
        ("llama-2-70b", 1024, 2048, 236.78, 26.62, 2.0),
        ("llama-2-70b", 2048, 2048, 690.96, 26.85, 2.0),
        ("mistral-7b", 8192, 8192, 1322.87, 9.89, 2.0),
        ("codellama-13b", 4096, 4096, 868.64, 9.86, 2.0),
        ("codellama-13b", 8192, 8192, 2372.93, 13.40, 2.0),
    ]


def _mamba_ms(channels: int, seq_len: int, state: int = 16, batch: int = 1) -> float:
    """The NKI tutorial's mamba_v3 kernel on one Trainium1 NeuronCore, float32, priced from its
    instructions per (batch, 128-channel tile, state): one Scalar Engine activation (exp of
    delta * A), a Tensor Engine broadcast of B and of C across the partitions, and four Vector
    Engine instructions of two inputs (delta*u*B, the scan, times C, the accumulation); delta and
    u loaded once per channel tile, the output stored once. The Vector Engine bounds it."""
    trn1 = MACHINES["trn1"]
    tiles = batch * math.ceil(channels / 128) * state
    vector = tiles * 4 * engines.vector_engine_s(128 * seq_len, trn1, 1, inputs=2)
    scalar = tiles * engines.scalar_engine_s(128 * seq_len, trn1, 1)
    tensor = tiles * 2 * engines.tensor_engine_s(128, 1, seq_len, trn1, 1)
    dma = engines.dma_s(4 * batch * (3 * channels * seq_len + 2 * state * seq_len), trn1, 1)
    return (max(vector, scalar, tensor, dma) + trn1.graph_launch_s) * 1e3


def _train_seq_per_s(model, ranks, tp, pp, global_batch, seq):
    def run():
        layout = Layout(ranks, tp=tp, pp=pp)
        microbatches = global_batch // layout.dp
        p = predict(model, "trn1", layout, "train", 1, seq, microbatches=microbatches,
                    recompute=True)
        return global_batch / p.seconds
    return run


def cases() -> list[Case]:
    out = []
    for model, prompt, output, ttft, tpot, wbytes in _trn1_rows():
        label = f"{model} trn1 tp32 in{prompt}/out{output}"
        out.append(Case(f"{label} TTFT", "trn1 prefill (TTFT)", ttft, "ms", TRN1_TABLE,
                        _ttft(model, "trn1", 32, prompt, weight_bytes=wbytes)))
        out.append(Case(f"{label} TPOT", "trn1 decode (TPOT)", tpot, "ms", TRN1_TABLE,
                        _tpot(model, "trn1", 32, prompt, output, wbytes)))
    out.append(Case("llama-2-13b trn1 tp32 in64/out192 latency per token", "trn1 decode (TPOT)",
                    6.6, "ms", TRN1_TABLE_214, _tpot("llama-2-13b", "trn1", 32, 64, 192)))
    for model, source, ttft, tpot, output in (("llama-3-70b", TRN2_70B, 575.6, 19.8, 1500),
                                              ("llama-3.1-405b", TRN2_405B, 2442.0, 37.9, 1785)):
        label = f"{model} trn2 tp64 in10000/out{output}"
        out.append(Case(f"{label} TTFT", "trn2 prefill (TTFT)", ttft, "ms", source,
                        _ttft(model, "trn2", 64, 10000, sp=True)))
        out.append(Case(f"{label} TPOT", "trn2 decode (TPOT)", tpot, "ms", source,
                        _tpot(model, "trn2", 64, 10000, output)))
    for seq, ms in ((512, 1.6), (1024, 3.3), (2048, 6.6), (4096, 13.3), (8192, 27.8)):
        out.append(Case(f"NKI mamba_v3 channels 4096 seq {seq}", "NKI kernel (trn1)", ms, "ms",
                        MAMBA, lambda seq=seq: _mamba_ms(4096, seq)))
    out.append(Case("llama-3.1-8b pretraining 32x trn1 tp32 dp32 seq8192 gbs1024",
                    "training (trn1)", 47.95, "seq/s", TRN1_TRAIN,
                    _train_seq_per_s("llama-3-8b", 1024, 32, 1, 1024, 8192)))
    out.append(Case("llama-3.1-70b pretraining 32x trn1 tp32 pp8 dp4 seq8192 gbs1024",
                    "training (trn1)", 7.94, "seq/s", TRN1_TRAIN,
                    _train_seq_per_s("llama-3-70b", 1024, 32, 8, 1024, 8192)))
    return out


def gpu_workloads() -> dict:
    """The workloads benchmarks/gpu/h100_time_model.py times (its WORKLOADS table)."""
    path = pathlib.Path(__file__).resolve().parent / "gpu" / "h100_time_model.py"
    spec = importlib.util.spec_from_file_location("h100_time_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WORKLOADS


def predict_gpu_ms(spec: tuple, graph: bool) -> float:
    """The model's `h100` time of one of the GPU script's workloads, on one GPU."""
    h100 = MACHINES["h100"]
    if spec[0] == "matmul":
        m, k, n = spec[1:]
        tensor = engines.tensor_engine_s(m, k, n, h100, 1)
        dma = engines.dma_s(2 * (m * k + k * n + m * n), h100, 1)
        return (max(tensor, dma) + h100.kernel_launch_s) * 1e3
    model, workload, batch, context = spec
    return predict(model, "h100", Layout(1), workload, batch, context,
                   graph=graph).seconds * 1e3


def report_gpu(path: pathlib.Path) -> None:
    measured = json.loads(path.read_text())
    graph = bool(measured.get("graphs"))
    print(f"GPU check: {measured['device']}, torch {measured['torch']}, "
          f"{'CUDA graphs' if graph else 'eager'} (predicted with graph={graph})")
    for name, spec in gpu_workloads().items():
        rounds = measured["workloads"].get(name)
        if not rounds:
            print(f"{name:44s} not measured")
            continue
        med = statistics.median(rounds)
        predicted = predict_gpu_ms(spec, graph)
        print(f"{name:44s} predicted {predicted:9.3f} ms  measured {med:9.3f} ms "
              f"({min(rounds):.3f}..{max(rounds):.3f})  ratio {predicted / med:.2f}x")


def _error(ratio: float) -> float:
    return abs(ratio - 1.0)


def _summary(rows) -> tuple[float, float]:
    ratios = [r for *_, r, _ in rows]
    worst = max(ratios, key=lambda r: abs(math.log(r)))  # furthest from 1 either way
    return statistics.median(_error(r) for r in ratios), worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--only", help="run the cases of one class (a substring of its name)")
    parser.add_argument("--gpu-results", type=pathlib.Path,
                        help="benchmarks/gpu/h100_time_model.py's JSON: compare it instead")
    args = parser.parse_args()
    if args.gpu_results:
        report_gpu(args.gpu_results)
        return
    selected = [c for c in cases() if not args.only or args.only in c.kind]
    if not selected:
        raise SystemExit(f"no case's class contains {args.only!r}")
    rows = []
    started = time.perf_counter()
    for case in selected:
        predicted = case.predict()
        rows.append((case, predicted, predicted / case.published, case.source))
    elapsed = time.perf_counter() - started
    if args.markdown:
        print("| case | class | predicted | published | ratio | source |")
        print("|---|---|---|---|---|---|")
        for case, predicted, ratio, source in rows:
            print(f"| {case.name} | {case.kind} | {predicted:.4g} {case.unit} | "
                  f"{case.published:g} {case.unit} | {ratio:.2f}x | {source} |")
        print()
        print("| class | cases | median abs error | worst ratio |")
        print("|---|---|---|---|")
    else:
        for case, predicted, ratio, source in rows:
            print(f"{case.name:64s} {predicted:10.4g} {case.published:10g} {case.unit:5s} "
                  f"{ratio:6.2f}x  {source}")
        print()
    for kind in dict.fromkeys(c.kind for c, *_ in rows):
        group = [r for r in rows if r[0].kind == kind]
        med, worst = _summary(group)
        if args.markdown:
            print(f"| {kind} | {len(group)} | {med:.0%} | {worst:.2f}x |")
        else:
            print(f"{kind:28s} {len(group):3d} cases  median |error| {med:.0%}  worst {worst:.2f}x")
    med, worst = _summary(rows)
    print()
    print(f"{len(rows)} cases, traced and priced in {elapsed:.1f} s")
    print(f"median |error|: {med:.0%}")
    print(f"worst ratio: {worst:.2f}x")


if __name__ == "__main__":
    main()
