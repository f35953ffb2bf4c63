"""The memory advisor (torch.neuron.memory.explain() and the out-of-memory message's tail): a
step that does not fit a small device (NEURON_HBM_BYTES, the per-process fraction for each case)
is explained from a full-size FakeTensorMode trace; each suggestion, applied for real, fits, its
measured peak within 15% of the estimate and its loss equal to the CPU's
(memory_advisor_worker.py runs it all in one process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron.device import _oom_message
from torchneuron.device.memory_breakdown import fmt, measure_step

WORKER = Path(__file__).with_name("memory_advisor_worker.py")


CASES = ("inline", "verdict", "base", "bf16", "checkpointing", "batch", "fraction_limited", "fraction")


@pytest.fixture(scope="module")
def advised():
    """Each case in its own process (an out-of-memory run leaves memory behind), all at once.
    Synchronous execution: in async mode blocks freed while queued work may still use them
    stay cached until it completes, which the estimates do not count."""
    env = {**os.environ, "NEURON_HBM_BYTES": "96MiB", "NEURON_EAGER_MODE": "sync",
           "PYTHONPATH": str(Path(torchneuron.__file__).resolve().parent.parent)}
    procs = {c: subprocess.Popen([sys.executable, str(WORKER), c], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env) for c in CASES}
    results = {}
    for case, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        results[case] = json.loads(out.strip().splitlines()[-1])
    return results


def check_applied(case: dict) -> None:
    assert case["fits"], case.get("error")
    assert case["fits_estimated"]
    assert abs(case["peak"] - case["estimate"]) <= 0.15 * case["estimate"], case


@pytest.mark.slow
def test_the_step_does_not_fit_and_explain_says_why(advised):
    assert not advised["base"]["fits"]
    assert advised["base"]["error"].startswith("neuron out of memory. Tried to allocate")
    text = advised["base"]["text"]
    for part in ("does not fit", "parameters", "optimizer state", "activations", "temporaries",
                 "bf16 autocast", "activation checkpointing", "FSDP2", "batch "):
        assert part in text, text


@pytest.mark.slow
def test_an_out_of_memory_message_ends_with_the_advice(advised):
    message = advised["inline"]["error"]
    assert message.startswith("neuron out of memory. Tried to allocate"), message
    assert "In use when it failed, by what it is for" in message
    for part in ("parameters", "gradients", "optimizer state", "bf16 autocast", "FSDP2",
                 "half the batch", "no expandable_segments"):
        assert part in message, message


@pytest.mark.slow
def test_an_out_of_memory_message_says_which_change_makes_the_request_fit(advised):
    """60 MiB held (activations, to the advisor) and 40 MiB more asked of a 96 MiB device: with
    the request the peak is 100 MiB; at half the batch it would be 50 MiB, which fits, while
    FSDP2 (there are no parameters to shard) changes nothing."""
    case = advised["verdict"]
    assert not case["fits"]
    message = case["error"]
    peak = fmt(case["in_use"] + (40 << 20))
    assert (f"With the failed request of 40.00 MiB (counted as a temporary): {peak} of "
            f"96.00 MiB usable: does not fit.") in message, message
    half = fmt((case["in_use"] + (40 << 20)) // 2)
    assert re.search(rf"- half the batch: saves ~[0-9.]+ MiB, peak ~{re.escape(half)} \(fits\)",
                     message), message
    assert re.search(r"- FSDP2[^:]*: saves ~0 B, peak ~[0-9.]+ MiB \(does not fit\)",
                     message), message


@pytest.mark.slow
def test_bf16_autocast_makes_it_fit(advised):
    check_applied(advised["bf16"])


@pytest.mark.slow
def test_activation_checkpointing_makes_it_fit(advised):
    check_applied(advised["checkpointing"])


@pytest.mark.slow
def test_a_smaller_batch_makes_it_fit(advised):
    check_applied(advised["batch"])
    assert advised["batch"]["size"] < 2048


@pytest.mark.slow
def test_the_allocator_setting_makes_it_fit(advised):
    assert not advised["fraction_limited"]["fits"]
    assert "set_per_process_memory_fraction" in advised["fraction_limited"]["error"]
    check_applied(advised["fraction"])
    assert "the whole device" in advised["fraction"]["text"]


def test_explain_now_counts_parameters_and_optimizer_state():
    model = torch.nn.Linear(64, 64).to("neuron")
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(4, 64, device="neuron")).sum().backward()
    opt.step()
    torch.neuron.synchronize()
    parts = torch.neuron.memory.explain().peak.parts
    weights = 64 * 64 * 4 + 64 * 4
    assert parts["parameters"] >= weights and parts["gradients"] >= weights
    assert parts["optimizer_state"] >= 2 * weights
    torch.testing.assert_close(model.weight.grad.cpu().shape, torch.Size([64, 64]))


def test_explain_refuses_a_model_without_a_step():
    with pytest.raises(ValueError, match="pass step too"):
        torch.neuron.memory.explain(model=torch.nn.Linear(2, 2))


def test_explain_refuses_a_step_without_its_model():
    with pytest.raises(ValueError, match="pass the model"):
        torch.neuron.memory.explain(lambda: None)


def test_measure_step_refuses_what_is_not_a_step():
    with pytest.raises(TypeError, match="step must be a callable"):
        measure_step(3, torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        measure_step(lambda: None, "model")
    with pytest.raises(ValueError, match="iterations must be a positive int"):
        measure_step(lambda: None, torch.nn.Linear(2, 2), iterations=0)


def test_a_message_tail_must_be_callable():
    with pytest.raises(TypeError, match="must be callable"):
        _oom_message.add_tail("not a function")
