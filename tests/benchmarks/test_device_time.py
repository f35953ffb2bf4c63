"""Every benchmark's neuron time includes the device's time: one test per benchmark file runs
that file's own timing path, in a tiny mode, on a case whose device time is known (a queued
torch.neuron._sleep of SLEEP_S per call) and fails if the neuron figure leaves it out. That is
what a benchmark that stops its clock before the device finished (timing the launches only, as
an asynchronous mode returns at once) gets wrong. No speed is asserted: the bound is the sleep
itself, which no machine load can shorten."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import time

import torch
import torch.distributed as dist

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SLEEP_S = 0.02
# Both clocks are CLOCK_MONOTONIC (perf_counter, std::chrono::steady_clock): a batch that waited
# for the device lasts at least its sleeps; the margin is rounding only.
AT_LEAST = 0.99 * SLEEP_S


def load(name: str):
    """benchmarks/<name>.py under a name of its own (benchmarks/kernels.py must not shadow the
    tests' kernels package), with benchmarks/ on the path for its `from timing import ...`."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def sleep_on(device: str):
    """A call that keeps the device busy SLEEP_S (queued, in async and fused mode) and returns a
    tensor; on the CPU the same call without the sleep."""
    def call():
        if torch.device(device).type == "neuron":
            torch.neuron._sleep(int(SLEEP_S * 1e9))
        return torch.ones(4, device=device)
    return call


def sleepy(x):
    """An op whose neuron call sleeps SLEEP_S on the device, differentiable like the library's."""
    if x.device.type == "neuron":
        torch.neuron._sleep(int(SLEEP_S * 1e9))
    return x * 2


def test_eager_overhead_counts_the_device_time():
    eager_overhead = load("eager_overhead")
    rows = eager_overhead.measure(1, cases=lambda device: {"sleep": (sleep_on(device), 3)})
    (_, neuron, cpu), = rows
    assert neuron >= AT_LEAST, f"neuron {neuron * 1e3:.2f} ms per call: the device's time is left out"
    assert cpu < SLEEP_S  # the case tells the sides apart


def test_eager_overhead_runs_the_same_optimizer_on_both_sides():
    import inspect

    eager_overhead = load("eager_overhead")
    for device in ("neuron", "cpu"):
        opt = inspect.getclosurevars(eager_overhead.demo_gpt_step(device)).nonlocals["gpt_opt"]
        assert opt.defaults["foreach"] is False, device


def test_compile_counts_the_device_time():
    compile_bench = load("compile")
    results = compile_bench.measure(1, workloads={"sleep": (lambda device, _: sleep_on(device), 2)})
    times = results["sleep"]
    for compiled in (False, True):
        assert times[("neuron", compiled)] >= AT_LEAST, (compiled, times)
    assert times[("cpu", False)] < SLEEP_S


def test_kernels_counts_the_device_time(monkeypatch):
    kernels = load("kernels")
    monkeypatch.setattr(kernels, "ROUND_S", 2 * SLEEP_S)  # a couple of calls per round
    (row,) = kernels.measure_ops({"sleep": ([torch.randn(4)], sleepy, sleepy, (0,))}, rounds=1,
                                 large=False)
    for side in ("op", "composite"):
        assert row[side][0] >= AT_LEAST, (side, row[side])
    assert row["cpu"][0] < SLEEP_S


def test_collectives_counts_the_device_time():
    collectives = load("collectives")
    dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=1)
    try:
        seconds = collectives.time_calls(sleep_on("neuron"), 2, dist.group.WORLD,
                                         torch.device("neuron", 0))
    finally:
        dist.destroy_process_group()
    assert seconds >= AT_LEAST, f"{seconds * 1e3:.2f} ms per call"


def test_adaptive_eager_counts_the_device_time():
    adaptive_eager = load("adaptive_eager")
    case = adaptive_eager.Case(sleep_on("neuron"), number=2, target=1.0)
    seconds, _ = adaptive_eager.time_case(case, "neuron")
    assert seconds >= AT_LEAST, f"{seconds * 1e3:.2f} ms per call"


def test_serving_generate_step_clock_counts_the_device_time():
    serving = load("serving")
    clock = serving.step_clock("neuron")
    ids = torch.zeros(1, 3, dtype=torch.long, device="neuron")
    start = time.perf_counter()
    torch.neuron._sleep(int(SLEEP_S * 1e9))  # a generate step's work, still queued
    assert not clock(ids, None).any()  # never stops generate()
    assert clock.times[0] - start >= AT_LEAST
