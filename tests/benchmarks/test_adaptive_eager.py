"""benchmarks/adaptive_eager.py: a smoke run at tiny sizes (every eager mode the configuration
accepts, each in its own process, its table's shape and its results-equal-sync column), and its
parts in process: the comparison that fills that column, what a case leaves to compare, the
profile's categories and split. No timing is asserted (benchmarks are not timed tests)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch

from torchneuron.runtime.config import EAGER_MODES

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHMARKS = str(ROOT / "benchmarks")
sys.path.insert(0, BENCHMARKS)  # the benchmarks import each other by file name
try:
    import adaptive_eager
    import eager_overhead  # adaptive_eager's cases import it later: it must be loaded now
finally:
    sys.path.remove(BENCHMARKS)  # benchmarks/kernels.py must not shadow the tests' kernels


def markdown_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row in `text`, separator rows left out."""
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines()
            if line.startswith("|") and not re.fullmatch(r"\|(-+:?\|)+", line.strip())]


@pytest.fixture(scope="module")
def smoke_run() -> str:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "adaptive_eager.py"),
                           "--tiny", "--repeats", "1", "--threads", "1", "--markdown"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_the_table_has_every_case_and_every_mode(smoke_run):
    header, *body = markdown_rows(smoke_run)
    expected = ["case", "CPU"]
    for mode in ["sync", *(m for m in EAGER_MODES if m != "sync")]:
        expected += [mode, f"CPU/{mode}"] + ([f"{mode} = sync"] if mode != "sync" else [])
    assert header == expected + ["target (fused)"]
    small = list(eager_overhead.small_op_cases("cpu"))
    assert [row[0] for row in body[3:]] == small
    assert body[0][0].startswith("pointwise chain: 20 ops")
    assert body[1][0].startswith("decoder block step")
    assert body[2][0] == "GPT (demo) training step"
    for row in body:
        assert len(row) == len(header)
        for name, cell in zip(header, row):
            if name.startswith("CPU/"):
                assert re.fullmatch(r"\d+\.\d\dx\*?", cell), cell
            elif name in ("CPU", *EAGER_MODES):
                assert re.fullmatch(r"[\d.]+ (us|ms) \([\d.]+-[\d.]+\)", cell), cell


@pytest.mark.slow
def test_every_mode_computes_what_sync_computes(smoke_run):
    header, *body = markdown_rows(smoke_run)
    for column, name in enumerate(header):
        if name.endswith(" = sync"):
            verdicts = {row[0]: row[column] for row in body}
            # async runs the very same kernels, so its results are the same bits; a fusing
            # mode may round differently, within float32 tolerance
            allowed = {"bitwise"} if name == "async = sync" else {"bitwise", "close"}
            assert set(verdicts.values()) <= allowed, (verdicts, smoke_run)
    assert "DIFF" not in smoke_run


def test_agreement_tells_bitwise_close_and_different_apart():
    a = [torch.linspace(1, 2, 100), torch.tensor(3.0)]
    assert adaptive_eager.agreement(a, [t.clone() for t in a]) == ("bitwise", "")
    one_ulp = [torch.nextafter(a[0], torch.tensor(3.0)), a[1]]
    assert adaptive_eager.agreement(a, one_ulp) == ("close", "")
    verdict, why = adaptive_eager.agreement(a, [a[0] + 1e-3, a[1]])
    assert verdict == "DIFF" and "mismatched" in why.lower()
    assert adaptive_eager.agreement(a, a[:1])[0] == "DIFF"
    assert adaptive_eager.agreement(a, [a[0].double(), a[1]])[0] == "DIFF"


def test_every_case_leaves_results_to_compare_and_neuron_matches_the_cpu():
    results = {}
    for device in ("cpu", "neuron"):
        cases = adaptive_eager.build_cases(device, adaptive_eager.TINY_SIZES)
        results[device] = {}
        for name, case in cases.items():
            returned = case.fn()
            results[device][name] = adaptive_eager.observable(case.fn, returned)
    assert all(results["cpu"].values()), "a case leaves nothing to compare"
    # The chain and the decoder block build their inputs on the CPU and move them; the other
    # cases draw theirs from the device's own generator, so only modes of one device compare.
    chain, decoder = list(results["cpu"])[:2]
    for name in (chain, decoder):
        verdict, why = adaptive_eager.agreement(results["cpu"][name], results["neuron"][name])
        assert verdict in ("bitwise", "close"), (name, why)
    # a training case returns its loss, and its closure yields each parameter, its gradient, the
    # input
    linear = results["cpu"]["Linear(16,16) fwd+bwd"]
    assert [tuple(t.shape) for t in linear] == [(), (16, 16), (16, 16), (16,), (16,), (8, 16)]


def test_profile_categories():
    category = adaptive_eager.category
    assert category("aten::mm") == category("aten::bmm") == "matmul"
    assert category("aten::_softmax_backward_data") == "attention softmax"
    assert category("aten::mul") == category("aten::rsqrt") == "pointwise + reductions"
    assert category("aten::mean") == category("aten::_foreach_add_") == "pointwise + reductions"
    assert category("aten::cat") == category("aten::copy_") == "rest"
    assert category("Optimizer.step#AdamW.step") == category("aten::not_an_op") == "rest"


@pytest.mark.parametrize("device", ["cpu", "neuron"])
def test_profile_split_adds_up(device):
    finish = torch.neuron.synchronize if device == "neuron" else None
    profile = adaptive_eager.profile_decoder(device, adaptive_eager.TINY_SIZES, finish, steps=1)
    text = adaptive_eager.profile_split({device: profile}, markdown=True)
    header, *rows = markdown_rows(text)
    clocks = [r[1].split(" ")[0] for r in rows]
    assert clocks == (["self"] if device == "cpu" else ["self", "device"])
    for row in rows:
        shares = [int(c.rstrip("%")) for c in row[3:3 + len(adaptive_eager.CATEGORIES)]]
        assert abs(sum(shares) - 100) <= len(shares), row  # rounding of each share
        assert shares[0] > 0, f"no matmul time in the decoder block: {row}"
    assert "aten::mm" in adaptive_eager.top_ops(device, profile, markdown=True)


WARM_UP_THEN_TIME = """
import inspect
import sys
import torch
sys.path.insert(0, sys.argv[1])
import adaptive_eager
from torchneuron.fused_eager import queue_feeder

case = adaptive_eager.pointwise_chain_case("neuron", adaptive_eager.DEFAULT_SIZES)
assert case.keep_results
adaptive_eager.warm_up(case, "neuron", first=True)
before = queue_feeder.stats()
kept = [case.fn() for _ in range(5)]  # timed calls hold their results (timing.seconds_per_call)
torch.neuron.synchronize()
after = queue_feeder.stats()
x = inspect.getclosurevars(case.fn).nonlocals["x"].cpu()  # the chain's input
expected = x
for op in adaptive_eager.POINTWISE_CHAIN:
    expected = op(expected)
for result in kept:
    torch.testing.assert_close(result.cpu(), expected)
print(*(after[k] - before[k] for k in ("requested", "chains", "chains_fused")))
"""


def test_first_warm_up_reaches_the_fused_steady_state():
    """A case's first warm-up leaves nothing to compile: the timed calls that follow run fused
    chains only. (A case's first two calls make chains of their own, so NEURON_FUSION_HOT + 1
    calls leave its steady chain one call short of hot.)"""
    done = subprocess.run([sys.executable, "-c", WARM_UP_THEN_TIME, BENCHMARKS], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NEURON_EAGER_MODE": "fused"})
    assert done.returncode == 0, done.stderr[-3000:]
    requested, chains, fused = map(int, done.stdout.split()[-3:])
    assert requested == 0
    assert fused == chains >= 5  # the five calls' chains, each fused
