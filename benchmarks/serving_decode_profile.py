"""Where a decode step's time goes: vLLM on neuron against vLLM's CPU platform, on the serving
benchmark's tiny Llama and engine settings (benchmarks/serving.py: float32, eager, 64 MiB KV
cache, one intra-op thread), 8 prompts decoding 32 greedy tokens together.

Each platform runs in a process of its own with its engine core and worker in that process
(VLLM_ENABLE_V1_MULTIPROCESSING=0); the CPU platform is chosen as docs/serving.md says to compare,
`VLLM_PLUGINS` leaving neuron out. After a warm-up generate, the worker times each step (the
model runner's execute_model plus sample_tokens, on neuron until the device has finished; a
decode step is one whose batch is all 8 requests, one token each); a second generate runs under torch.profiler (CPU activities), whose
self times, divided by the steps it saw, give each op's time per step. The platforms alternate
for --rounds rounds, so both see the machine's load; the table gives the median decode step of
each round (its min-max over rounds), the neuron/CPU ratio of each round's medians and of the
fastest steps (load only slows a step down), and the ops that take the most time per step: on
neuron the host's self time (dispatch, queueing) and the device's (the kernel, recorded with
ProfilerActivity.PrivateUse1; the two overlap, the device running behind the host), on the CPU
the self time, which is both.

A helper of benchmarks/serving.py, which runs it:

    .venv-serve/bin/python benchmarks/serving.py --decode-profile [--rounds 3] [--top 15]
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

from serving import ENGINE_OPTIONS, prompts
from timing import median, settings

SERVING = pathlib.Path(__file__).resolve().with_name("serving.py")

BATCH = 8
MAX_TOKENS = 32


# --- in the worker (run by collective_rpc, in the engine's process) ------------------------


def _install_timers(worker) -> None:
    import time

    import torch

    # A neuron step returns once its work is queued: the step ends when the device is done.
    sync = torch.neuron.synchronize if worker.device.type == "neuron" else (lambda: None)
    runner = worker.model_runner
    runner._steps = []
    execute, sample = runner.execute_model, runner.sample_tokens

    def timed_execute(scheduler_output, *args, **kwargs):
        start = time.perf_counter()
        try:
            return execute(scheduler_output, *args, **kwargs)
        finally:
            runner._steps.append([scheduler_output.total_num_scheduled_tokens,
                                  len(scheduler_output.num_scheduled_tokens),
                                  time.perf_counter() - start])

    def timed_sample(*args, **kwargs):
        start = time.perf_counter()
        try:
            return sample(*args, **kwargs)
        finally:
            sync()
            if runner._steps:
                runner._steps[-1][2] += time.perf_counter() - start

    runner.execute_model, runner.sample_tokens = timed_execute, timed_sample


def _take_steps(worker) -> list:
    steps, worker.model_runner._steps = worker.model_runner._steps, []
    return steps


def _start_profile(worker) -> None:
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if worker.device.type == "neuron":  # the kernels, timed where the device runs them
        activities.append(torch.profiler.ProfilerActivity.PrivateUse1)
    worker.model_runner._profile = torch.profiler.profile(activities=activities)
    worker.model_runner._profile.__enter__()


def _stop_profile(worker) -> dict:
    profile = worker.model_runner._profile
    profile.__exit__(None, None, None)
    return {e.key: [e.self_cpu_time_total, getattr(e, "self_device_time_total", 0), e.count]
            for e in profile.key_averages()}


def run_platform(model: str) -> None:
    from vllm import LLM, SamplingParams
    from vllm.platforms import current_platform

    llm = LLM(model=model, **ENGINE_OPTIONS)
    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)
    batch = prompts(BATCH)
    llm.generate(batch, params, use_tqdm=False)  # warm-up
    llm.collective_rpc(_install_timers)
    tokens = [o.outputs[0].token_ids for o in llm.generate(batch, params, use_tqdm=False)]
    (steps,) = llm.collective_rpc(_take_steps)
    llm.collective_rpc(_start_profile)
    llm.generate(batch, params, use_tqdm=False)
    (ops,) = llm.collective_rpc(_stop_profile)
    (profiled,) = llm.collective_rpc(_take_steps)
    decode = [s for t, r, s in steps if t == r == BATCH]
    print("RESULT " + json.dumps({"platform": current_platform.device_type, "decode": decode,
                                  "steps_profiled": len(profiled), "ops": ops,
                                  "tokens": [list(t) for t in tokens]}), flush=True)


# --- the driver ---------------------------------------------------------------------------


def measure(platform: str, model: str) -> dict:
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
           "VLLM_ALLOW_INSECURE_SERIALIZATION": "1"}
    env.pop("VLLM_TARGET_DEVICE", None)
    if platform == "cpu":
        env["VLLM_PLUGINS"] = ""  # docs/serving.md's comparison switch
    else:
        env.pop("VLLM_PLUGINS", None)
    done = subprocess.run([sys.executable, str(SERVING), "--decode-worker", model], env=env,
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{platform} run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    result = json.loads(next(line[7:] for line in done.stdout.splitlines()
                             if line.startswith("RESULT ")))
    if result["platform"] != platform:
        raise RuntimeError(f"asked for {platform}, vLLM ran {result['platform']}")
    return result


def profile(rounds: int, top: int) -> None:
    from torchneuron.serving import tiny_model

    print(settings())
    with tempfile.TemporaryDirectory() as folder:
        model = str(tiny_model.build(pathlib.Path(folder) / "tiny-llama"))
        runs = measure_rounds(model, rounds)
    print(f"load at the end: {settings()}")
    report(runs, rounds, top)


def measure_rounds(model: str, rounds: int) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {"neuron": [], "cpu": []}
    for r in range(rounds):
        for platform in (("neuron", "cpu") if r % 2 == 0 else ("cpu", "neuron")):
            runs[platform].append(measure(platform, model))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    if runs["neuron"][0]["tokens"] != runs["cpu"][0]["tokens"]:
        raise RuntimeError("neuron and the CPU produced different greedy tokens")
    return runs


def report(runs: dict[str, list[dict]], rounds: int, top: int) -> None:

    step = {p: [median(run["decode"]) * 1e3 for run in runs[p]] for p in runs}
    ratios = [n / c for n, c in zip(step["neuron"], step["cpu"])]
    print(f"\ndecode step, {BATCH} sequences (ms, median of each round's steps; min-max over "
          f"{rounds} rounds)")
    for p in ("neuron", "cpu"):
        print(f"  {p:7s} {median(step[p]):7.2f}  [{min(step[p]):.2f}-{max(step[p]):.2f}]")
    print(f"  neuron/CPU {median(ratios):.2f}x  [{min(ratios):.2f}-{max(ratios):.2f}]")
    # Load only ever slows a step down: the fastest steps are the least disturbed.
    fastest = {p: min(s for run in runs[p] for s in run["decode"]) * 1e3 for p in runs}
    print(f"  fastest step: neuron {fastest['neuron']:.2f}, CPU {fastest['cpu']:.2f}, "
          f"neuron/CPU {fastest['neuron'] / fastest['cpu']:.2f}x")

    # Per op and step: on neuron the host's self time (dispatch and queueing) and the device's
    # (the kernel); on the CPU the self time, which is both.
    per_step = {}
    for p in runs:
        table: dict[str, list[tuple[float, float, float]]] = {}
        for run in runs[p]:
            n = run["steps_profiled"]
            for name, (host_us, device_us, count) in run["ops"].items():
                table.setdefault(name, []).append((host_us / n, device_us / n, count / n))
        per_step[p] = {name: tuple(median([v[i] for v in values]) for i in range(3))
                       for name, values in table.items()}
    neuron, cpu = per_step["neuron"], per_step["cpu"]
    zero = (0.0, 0.0, 0.0)
    names = sorted(set(neuron) | set(cpu),
                   key=lambda n: -max(neuron.get(n, zero)[0], neuron.get(n, zero)[1],
                                      cpu.get(n, zero)[0]))[:top]
    print(f"\nper step under torch.profiler (us, median of the rounds; calls per step): neuron "
          f"host {sum(v[0] for v in neuron.values()):.0f} us and device "
          f"{sum(v[1] for v in neuron.values()):.0f} us, CPU {sum(v[0] for v in cpu.values()):.0f}"
          " us")
    print(f"  {'op':44s} {'neuron host':>12s} {'neuron device':>14s} {'CPU':>16s}")
    for name in names:
        n_host, n_dev, n_calls = neuron.get(name, zero)
        c_host, _, c_calls = cpu.get(name, zero)
        print(f"  {name[:44]:44s} {n_host:12.0f} {n_dev:7.0f} ({n_calls:4.1f}) "
              f"{c_host:8.0f} ({c_calls:4.1f})")
