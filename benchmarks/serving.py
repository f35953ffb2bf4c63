"""Serving: vLLM on neuron against vLLM's own CPU platform, in the same run, on the same tiny
Llama (torchneuron/serving/tiny_model.py, float32) and the same requests; Hugging Face
`generate()` on neuron as the baseline that serving must beat.

At each concurrency c (1, 8, 32), 2c requests (at least 8) with prompts of 15 to 72 tokens, each
asking for 32 tokens (end-of-sequence ignored), go through vLLM's AsyncLLM with at most c in
flight. Output tokens/s is all output tokens over the wall time of the level; time to first
token (TTFT) is from a request's submission to its first token; inter-token latency (ITL) is the
time between a request's successive outputs. Both engines run eager (no torch.compile), with the
same scheduler settings and a 64 MiB KV cache, one at a time, each in a process of its own; they
alternate for --rounds rounds, so both see the machine's load. vLLM gives both workers one
intra-op thread (the CPU's is also pinned to a core). Hugging Face `generate()` runs the same
prompts on neuron in batches of c (left-padded), its TTFT being the first step of a batch, each
step's time read after torch.neuron.synchronize (vLLM's tokens reach the host before they count).
Throughput is the median of the rounds (min-max in brackets); latencies pool all rounds.

On a shared machine a level's throughput can halve from one round to the next, so the second
table pairs the engines instead: both are alive at once, each in a process of its own with its
engine core in that process (VLLM_ENABLE_V1_MULTIPROCESSING=0) and one intra-op thread, and they
take turns on the same `LLM.generate()` of c prompts (32 greedy tokens each, repeated so that a
turn lasts a few hundred milliseconds), the first to go alternating between rounds. Each pair of
turns gives a neuron/CPU throughput ratio, by wall time and by the CPU time of the thread that ran
the engine (which a neighbour's load disturbs less); the table gives their median and min-max
over --paired-rounds rounds, and the ratio of each engine's fastest turn (load only ever slows a
turn down, so the fastest turns are the least disturbed), and checks that both engines produced
the same tokens.

    .venv-serve/bin/python benchmarks/serving.py [--rounds 2] [--paired-rounds 7] [--markdown]

`--forward` instead times vLLM's model forward per decode step, neuron (decode graphs,
torchneuron/serving/decode_graphs.py) against vLLM's CPU platform, with the same compile settings
on both (no torch.compile: `compilation_config` mode 0; with `--compile`, vLLM's default mode,
the model compiled by Inductor on both; graphs on, which the CPU platform does not capture), both
engines alive and taking turns as in the paired table. Each turn generates
32 greedy tokens for each of b prompts (b = 1, 2, 4, 8, the decode batch; the neuron graphs
are captured for these sizes) a few times; the runner's model call is timed for every decode
step of b tokens, from before the call to after the device finished it (torch.neuron
.synchronize on both sides of the call on neuron), so the forward excludes vLLM's input
preparation, sampler and detokenizer. The table gives, per b, the median forward time per
decode step of each engine, their ratio per round (median and min-max over --paired-rounds
rounds), the rest of a step (the turn's wall time less its decode steps' forward, per step, 32
steps a generate: vLLM's engine, scheduler, input preparation, sampler, detokenizer, and the one
prefill step), the end-to-end output tokens/s of the same turns, in how many rounds both engines
gave the same greedy tokens (the graphs run PyTorch's linear, norm and rotary forms, vLLM CPU its
own kernels: float32 rounding differs), and the load average. The neuron engine runs in this
environment's eager mode (NEURON_EAGER_MODE, on the settings line): decode graphs do best in
`sync`, where a replay runs on the calling thread.

    .venv-serve/bin/python benchmarks/serving.py --forward [--compile] [--paired-rounds 7]

`--decode-profile` instead profiles one decode step on each platform (where the time goes,
benchmarks/serving_decode_profile.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from timing import finish_for, median, settings  # noqa: E402

CONCURRENCY = (1, 8, 32)
HF_CONCURRENCY = (8, 32)
MAX_TOKENS = 32
ENGINE_OPTIONS = dict(dtype="float32", max_model_len=256, enforce_eager=True, seed=0,
                      kv_cache_memory_bytes=64 << 20, max_num_seqs=32,
                      max_num_batched_tokens=512)
WORDS = ("the device trains and the same device serves a model that learns from text and "
         "answers questions one token at a time while other requests wait").split()


def prompts(n: int) -> list[str]:
    """n prompts of 10 to 60 tokens, the same in every run."""
    return [" ".join(WORDS[(7 * i) % len(WORDS):] + WORDS)[: 50 + (37 * i) % 250]
            for i in range(n)]


def requests_at(c: int) -> int:
    return max(2 * c, 8)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


# --- one engine, in its own process ------------------------------------------------------------


async def vllm_level(engine, c: int) -> dict:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True,
                            output_kind=RequestOutputKind.DELTA)
    gate = asyncio.Semaphore(c)
    ttft, itl, tokens = [], [], 0

    async def one(i: int, prompt: str) -> None:
        nonlocal tokens
        async with gate:
            start = last = time.perf_counter()
            async for out in engine.generate(prompt, params, request_id=f"{c}-{i}-{start}"):
                now = time.perf_counter()
                if out.outputs[0].token_ids:
                    (itl if last > start else ttft).append(now - last)
                    tokens += len(out.outputs[0].token_ids)
                    last = now

    async def run_all(batch: list[str]) -> float:
        begin = time.perf_counter()
        await asyncio.gather(*(one(i, p) for i, p in enumerate(batch)))
        return time.perf_counter() - begin

    await run_all(prompts(min(c, 4)))  # warm-up: first shapes, allocator
    ttft.clear(), itl.clear()
    tokens = 0
    wall = await run_all(prompts(requests_at(c)))
    return {"tok_s": tokens / wall, "ttft": ttft, "itl": itl}


def run_vllm(model: str) -> dict:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.platforms import current_platform
    from vllm.v1.engine.async_llm import AsyncLLM

    async def all_levels(engine) -> dict:  # one event loop: the engine's output task lives in it
        return {c: await vllm_level(engine, c) for c in CONCURRENCY}

    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=model, **ENGINE_OPTIONS))
    try:
        levels = asyncio.run(all_levels(engine))
    finally:
        engine.shutdown()
    return {"platform": current_platform.device_type, "levels": levels}


def step_clock(device: str):
    """A stopping criterion of `generate()` that never stops it and records, at each generated
    token, when the device has finished that step (the step's work may still be queued when
    `generate()` asks)."""
    import torch
    from transformers.generation.stopping_criteria import StoppingCriteria

    finish = finish_for(device)

    class StepClock(StoppingCriteria):  # called once per generated token of the batch
        def __init__(self):
            self.times = []

        def __call__(self, input_ids, scores, **kwargs):
            if finish is not None:
                finish()
            self.times.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    return StepClock()


def run_hf(model: str) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
    lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).to("neuron").eval()
    config = GenerationConfig(do_sample=False, max_new_tokens=MAX_TOKENS, eos_token_id=None,
                              pad_token_id=tokenizer.pad_token_id)

    def batch(texts: list[str]) -> tuple[float, list[float]]:
        encoded = tokenizer(texts, return_tensors="pt", padding=True).to("neuron")
        torch.neuron.synchronize()  # the copy is not the batch's work
        clock = step_clock("neuron")
        start = time.perf_counter()
        with torch.no_grad():
            lm.generate(**encoded, generation_config=config, stopping_criteria=[clock])
        return start, clock.times

    levels = {}
    for c in HF_CONCURRENCY:
        batch(prompts(c))  # warm-up
        texts = prompts(requests_at(c))
        ttft, itl = [], []
        begin = time.perf_counter()
        for i in range(0, len(texts), c):
            start, steps = batch(texts[i:i + c])
            ttft += [steps[0] - start] * c
            itl += [b - a for a, b in zip(steps, steps[1:])] * c
        wall = time.perf_counter() - begin
        levels[c] = {"tok_s": len(texts) * MAX_TOKENS / wall, "ttft": ttft, "itl": itl}
    return {"platform": "hf-neuron", "levels": levels}


# --- paired: both engines alive, taking turns on the same generate ---------------------------

# Generates per turn at each concurrency, so that a turn lasts a few hundred milliseconds.
TURN_REPEATS = {1: 6, 8: 4, 32: 2}
TURN = "TURN "  # prefixes the lines a turn-taking engine answers with (vLLM logs to stdout too)


def take_turns(model: str) -> None:
    """One engine in this process: after warm-up, runs `TURN_REPEATS[c]` generates of c prompts
    for each line `c` read from stdin, and answers with their wall and thread CPU seconds (with
    VLLM_ENABLE_V1_MULTIPROCESSING=0 the engine runs in this, the calling, thread)."""
    import torch
    from vllm import LLM, SamplingParams
    from vllm.platforms import current_platform

    llm = LLM(model=model, **ENGINE_OPTIONS)
    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)
    for c in CONCURRENCY:
        llm.generate(prompts(c), params, use_tqdm=False)
    print(TURN + json.dumps({"platform": current_platform.device_type,
                             "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        c = int(line)
        wall, cpu = time.perf_counter(), time.thread_time()
        for _ in range(TURN_REPEATS[c]):
            outputs = llm.generate(prompts(c), params, use_tqdm=False)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        print(TURN + json.dumps({"wall": wall, "cpu": cpu,
                                 "tokens": [list(o.outputs[0].token_ids) for o in outputs]}),
              flush=True)


class TurnTaker:
    """A `take_turns` engine in a child process of its own."""

    def __init__(self, engine: str, model: str, log: pathlib.Path, mode: str = "--turns",
                 options: tuple[str, ...] = ()):
        env = {k: v for k, v in os.environ.items() if k != "VLLM_TARGET_DEVICE"}
        env.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", OMP_NUM_THREADS="1")
        if engine == "vllm-cpu":
            env["VLLM_TARGET_DEVICE"] = "cpu"
        self.engine, self.log_path, self.log = engine, log, log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--engine", engine, "--model", model, mode, *options],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)

    def answer(self) -> dict:
        for line in self.process.stdout:
            if line.startswith(TURN):
                return json.loads(line[len(TURN):])
        raise SystemExit(f"{self.engine} stopped:\n{self.log_path.read_text()[-3000:]}")

    def check_ready(self) -> None:
        ready = self.answer()
        expected = {"vllm-neuron": "neuron", "vllm-cpu": "cpu"}[self.engine]
        assert ready == {"platform": expected, "threads": 1}, (self.engine, ready)

    def turn(self, c: int) -> dict:
        self.process.stdin.write(f"{c}\n")
        self.process.stdin.flush()
        return self.answer()

    def close(self) -> None:
        self.process.stdin.close()  # ends its loop
        try:
            self.process.wait(timeout=120)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.log.close()


def paired(model: str, rounds: int, folder: pathlib.Path) -> dict[int, dict[str, list[float]]]:
    """Per concurrency: each round's neuron/CPU throughput ratio (by wall and by thread CPU time)
    and each engine's output tokens/s."""
    results = {c: {"wall": [], "cpu": [], "vllm-neuron": [], "vllm-cpu": []}
               for c in CONCURRENCY}
    if rounds == 0:
        return results
    engines = {}
    try:
        for name in ("vllm-neuron", "vllm-cpu"):
            engines[name] = TurnTaker(name, model, folder / f"{name}.log")
            engines[name].check_ready()
        for r in range(rounds):
            order = list(engines) if r % 2 == 0 else list(reversed(engines))
            for c in CONCURRENCY:
                turns = {name: engines[name].turn(c) for name in order}
                neuron, cpu = turns["vllm-neuron"], turns["vllm-cpu"]
                assert neuron["tokens"] == cpu["tokens"], f"greedy tokens differ at c={c}"
                tokens = TURN_REPEATS[c] * c * MAX_TOKENS
                results[c]["wall"].append(cpu["wall"] / neuron["wall"])
                results[c]["cpu"].append(cpu["cpu"] / neuron["cpu"])
                for name in engines:
                    results[c][name].append(tokens / turns[name]["wall"])
    finally:
        for engine in engines.values():
            engine.close()
    return results


def paired_table(results: dict[int, dict[str, list[float]]], markdown: bool) -> str:
    def spread(xs: list[float], digits: int) -> str:
        return f"{median(xs):.{digits}f} [{min(xs):.{digits}f}-{max(xs):.{digits}f}]"

    rows = [("c", "vllm-neuron tok/s", "vllm-cpu tok/s", "neuron/CPU by wall time",
             "neuron/CPU by thread CPU time", "neuron/CPU of best turns")]
    for c, r in results.items():
        if r["wall"]:
            best = max(r["vllm-neuron"]) / max(r["vllm-cpu"])
            rows.append((str(c), spread(r["vllm-neuron"], 0), spread(r["vllm-cpu"], 0),
                         spread(r["wall"], 2), spread(r["cpu"], 2), f"{best:.2f}"))
    return format_rows(rows, markdown)


# --- forward: model-forward time per decode step, graphs against vLLM CPU ----------------------

FORWARD_BATCHES = (1, 2, 4, 8)
FORWARD_REPEATS = 3  # generates per turn
# vLLM's defaults but no torch.compile, on both: the graphs are the only difference from eager.
FORWARD_OPTIONS = dict(dtype="float32", max_model_len=256, enforce_eager=False, seed=0,
                       compilation_config={"mode": 0}, kv_cache_memory_bytes=64 << 20,
                       max_num_seqs=8, max_num_batched_tokens=512)


def forward_options(compiled: bool) -> dict:
    """FORWARD_OPTIONS, or with `compiled` vLLM's default compilation mode (Inductor) instead."""
    if not compiled:
        return FORWARD_OPTIONS
    return {k: v for k, v in FORWARD_OPTIONS.items() if k != "compilation_config"}


class TimedForward:
    """Stands in for a runner's model: times each call whose batch is a decode step of the
    turn's batch size (the call's token count), the device's finish included."""

    def __init__(self, model, finish) -> None:
        self.__dict__.update(model=model, finish=finish or (lambda: None), batch=0, times=[])

    def __getattr__(self, key):
        return getattr(self.__dict__["model"], key)

    def __call__(self, *args, **kwargs):
        ids = kwargs.get("input_ids")
        if ids is None or ids.shape[0] != self.batch:
            return self.model(*args, **kwargs)
        self.finish()
        start = time.perf_counter()
        out = self.model(*args, **kwargs)
        self.finish()
        self.times.append(time.perf_counter() - start)
        return out


def forward_turns(model: str, compiled: bool) -> None:
    """One engine in this process (its engine core in this thread): for each line `b` on stdin,
    FORWARD_REPEATS generates of b prompts, answered with the decode steps' forward times and the
    turn's wall time."""
    import torch
    from vllm import LLM, SamplingParams
    from vllm.config import CUDAGraphMode
    from vllm.platforms import current_platform

    llm = LLM(model=model, **forward_options(compiled))
    runner = llm.llm_engine.model_executor.driver_worker.worker.model_runner
    graphs = runner.compilation_config.cudagraph_mode != CUDAGraphMode.NONE
    timed = runner.model = TimedForward(runner.model, finish_for(runner.device))
    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)
    texts = [" ".join(WORDS[i:] + WORDS)[:120] for i in range(max(FORWARD_BATCHES))]
    for b in FORWARD_BATCHES:
        llm.generate(texts[:b], params, use_tqdm=False)
    print(TURN + json.dumps({"platform": current_platform.device_type, "graphs": graphs,
                             "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        b = int(line)
        timed.batch, timed.times = b, []
        wall = time.perf_counter()
        for _ in range(FORWARD_REPEATS):
            outputs = llm.generate(texts[:b], params, use_tqdm=False)
        wall = time.perf_counter() - wall
        print(TURN + json.dumps({"forward": timed.times, "wall": wall,
                                 "tokens": [list(o.outputs[0].token_ids) for o in outputs]}),
              flush=True)
        timed.batch = 0


def forward(model: str, rounds: int, folder: pathlib.Path,
            compiled: bool) -> dict[int, dict[str, list]]:
    """Per decode batch: each engine's median forward seconds per step and tokens/s per round,
    the neuron/CPU forward ratio per round, and the load average at each round."""
    results = {b: {"ratio": [], "load": [], "vllm-neuron": [], "vllm-cpu": [],
                   "tok_s vllm-neuron": [], "tok_s vllm-cpu": [], "rest vllm-neuron": [],
                   "rest vllm-cpu": [], "same": []} for b in FORWARD_BATCHES}
    engines = {}
    try:
        for name in ("vllm-neuron", "vllm-cpu"):
            engines[name] = TurnTaker(name, model, folder / f"{name}.log", mode="--forward-turns",
                                      options=("--compile",) if compiled else ())
            ready = engines[name].answer()
            expected = {"platform": name.split("-")[1], "graphs": name == "vllm-neuron",
                        "threads": 1}
            assert ready == expected, (name, ready)
        for r in range(rounds):
            order = list(engines) if r % 2 == 0 else list(reversed(engines))
            for b in FORWARD_BATCHES:
                turns = {name: engines[name].turn(b) for name in order}
                results[b]["same"].append(
                    turns["vllm-neuron"]["tokens"] == turns["vllm-cpu"]["tokens"])
                step = {name: median(t["forward"]) for name, t in turns.items()}
                results[b]["ratio"].append(step["vllm-cpu"] / step["vllm-neuron"])
                results[b]["load"].append(os.getloadavg()[0])
                for name, t in turns.items():
                    results[b][name].append(step[name])
                    results[b][f"tok_s {name}"].append(
                        FORWARD_REPEATS * b * MAX_TOKENS / t["wall"])
                    steps = FORWARD_REPEATS * MAX_TOKENS
                    results[b][f"rest {name}"].append((t["wall"] - sum(t["forward"])) / steps)
    finally:
        for engine in engines.values():
            engine.close()
    return results


def forward_table(results: dict[int, dict[str, list]], markdown: bool) -> str:
    def spread(xs: list[float], digits: int, scale: float = 1.0) -> str:
        return (f"{median(xs) * scale:.{digits}f} "
                f"[{min(xs) * scale:.{digits}f}-{max(xs) * scale:.{digits}f}]")

    rows = [("b", "neuron forward us/step", "CPU forward us/step", "CPU/neuron forward",
             "neuron rest us/step", "CPU rest us/step", "neuron tok/s", "CPU tok/s",
             "same tokens", "load")]
    for b, r in results.items():
        if r["ratio"]:
            rows.append((str(b), spread(r["vllm-neuron"], 0, 1e6), spread(r["vllm-cpu"], 0, 1e6),
                         spread(r["ratio"], 2) + "x", spread(r["rest vllm-neuron"], 0, 1e6),
                         spread(r["rest vllm-cpu"], 0, 1e6), spread(r["tok_s vllm-neuron"], 0),
                         spread(r["tok_s vllm-cpu"], 0),
                         f"{sum(r['same'])}/{len(r['same'])}",
                         f"{min(r['load']):.1f}-{max(r['load']):.1f}"))
    return format_rows(rows, markdown)


# --- the run: engines one at a time, alternating ----------------------------------------------


def measure(engine: str, model: str) -> dict:
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"} if engine == "vllm-cpu" else \
        {k: v for k, v in os.environ.items() if k != "VLLM_TARGET_DEVICE"}
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        done = subprocess.run([sys.executable, __file__, "--engine", engine, "--model", model,
                               "--result", out.name], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{engine} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        result = json.loads(pathlib.Path(out.name).read_text())
    expected = {"vllm-neuron": "neuron", "vllm-cpu": "cpu", "hf-neuron": "hf-neuron"}[engine]
    assert result["platform"] == expected, (engine, result["platform"])
    return {int(c): level for c, level in result["levels"].items()}


def table(rounds: list[dict[str, dict]], markdown: bool) -> str:
    rows = [("c", "engine", "output tok/s", "TTFT ms median / p99", "ITL ms median / p99",
             "ratio")]
    for c in CONCURRENCY:
        throughput = {}
        for engine in ("vllm-neuron", "vllm-cpu", "hf-neuron"):
            levels = [r[engine][c] for r in rounds if c in r.get(engine, {})]
            if not levels:
                continue
            tok_s = [lv["tok_s"] for lv in levels]
            throughput[engine] = median(tok_s)
            ttft = [x * 1e3 for lv in levels for x in lv["ttft"]]
            itl = [x * 1e3 for lv in levels for x in lv["itl"]]
            ratio = ""
            if engine == "vllm-cpu":
                ratio = f"neuron/CPU {throughput['vllm-neuron'] / throughput[engine]:.2f}x"
            elif engine == "hf-neuron":
                ratio = f"vLLM-neuron/HF {throughput['vllm-neuron'] / throughput[engine]:.2f}x"
            rows.append((str(c), engine,
                         f"{throughput[engine]:.0f} [{min(tok_s):.0f}-{max(tok_s):.0f}]",
                         f"{median(ttft):.1f} / {percentile(ttft, 99):.1f}",
                         f"{median(itl):.1f} / {percentile(itl, 99):.1f}", ratio))
    return format_rows(rows, markdown)


def format_rows(rows: list[tuple[str, ...]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows[1:]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(r, widths)) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--paired-rounds", type=int, default=7)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--engine", choices=("vllm-neuron", "vllm-cpu", "hf-neuron"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--turns", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--forward", action="store_true",
                        help="model-forward time per decode step, graphs against vLLM CPU, for "
                             "--paired-rounds rounds")
    parser.add_argument("--compile", action="store_true",
                        help="with --forward: both engines compile the model (vLLM's default "
                             "mode) instead of running it uncompiled")
    parser.add_argument("--forward-turns", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--decode-profile", action="store_true",
                        help="profile a decode step on each platform, for --rounds rounds")
    parser.add_argument("--top", type=int, default=15, help="ops listed by --decode-profile")
    parser.add_argument("--decode-worker", metavar="MODEL", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.decode_worker or args.decode_profile:
        import serving_decode_profile
        if args.decode_worker:
            serving_decode_profile.run_platform(args.decode_worker)
        else:
            serving_decode_profile.profile(args.rounds, args.top)
        return

    if args.turns:  # one engine taking turns with another
        take_turns(args.model)
        return
    if args.forward_turns:
        forward_turns(args.model, args.compile)
        return
    if args.engine:  # one engine, in a process of its own
        result = run_hf(args.model) if args.engine == "hf-neuron" else run_vllm(args.model)
        pathlib.Path(args.result).write_text(json.dumps(result))
        return

    from torchneuron.serving import tiny_model

    start = time.monotonic()
    if args.forward:
        with tempfile.TemporaryDirectory() as folder:
            model = str(tiny_model.build(pathlib.Path(folder) / "tiny-llama"))
            results = forward(model, args.paired_rounds, pathlib.Path(folder), args.compile)
        line = (f"tiny Llama (2 layers, hidden 128, float32), {MAX_TOKENS} greedy tokens per "
                f"request, {FORWARD_REPEATS} generates per turn, {args.paired_rounds} rounds, "
                f"{time.monotonic() - start:.0f} s; "
                f"{'torch.compile (vLLM default mode)' if args.compile else 'no torch.compile'} "
                f"on both engines; "
                f"{settings(threads=1)} at the end")
        print(f"Settings: {line}\n" if args.markdown else line)
        print(forward_table(results, args.markdown))
        return
    with tempfile.TemporaryDirectory() as folder:
        model = str(tiny_model.build(pathlib.Path(folder) / "tiny-llama"))
        rounds = []
        for r in range(args.rounds):
            rounds.append({engine: measure(engine, model)
                           for engine in ("vllm-neuron", "vllm-cpu", "hf-neuron")})
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        pairs = paired(model, args.paired_rounds, pathlib.Path(folder))
    # vLLM sets its workers' threads (one each, checked); the eager mode is this environment's.
    line = (f"tiny Llama (2 layers, hidden 128, float32), {MAX_TOKENS} output tokens per "
            f"request, {args.rounds} rounds, {args.paired_rounds} paired rounds, "
            f"{time.monotonic() - start:.0f} s; {settings(threads=1)} at the end")
    print(f"Settings: {line}\n" if args.markdown else line)
    print(table(rounds, args.markdown))
    print("\nPaired, both engines alive and taking turns on the same generate of c prompts:\n"
          if args.markdown else "\npaired:")
    print(paired_table(pairs, args.markdown))


if __name__ == "__main__":
    main()
