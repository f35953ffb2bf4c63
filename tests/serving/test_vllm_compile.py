"""vLLM's default mode on neuron compiles the model with torch.compile (Inductor's C++ backend,
as on vLLM's CPU platform) and captures its decode steps as device graphs; the compiled model's
greedy tokens are Hugging Face's on the CPU."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("vllm")

from serving_common import run_script  # noqa: E402

pytestmark = pytest.mark.slow


def test_compiled_model_matches_hf_on_cpu(model_dir, hf_greedy):
    out = run_script("engine_run.py", str(model_dir), "--compile", timeout=900)
    result = json.loads(next(line[7:] for line in out.splitlines() if line.startswith("RESULT ")))
    assert result["platform"] == "neuron"
    # The worker says what the wait is before it compiles (vLLM's engine logs "No available
    # shared memory broadcast block" each minute meanwhile), and how long it took after.
    lines = out.splitlines()
    said = next(i for i, line in enumerate(lines) if "Compiling the model with torch.compile"
                in line and "it is not hung" in line)
    warming = next(i for i, line in enumerate(lines) if "Warming up model for the compilation"
                   in line)
    assert said < warming
    assert any(re.search(r"Compiled and warmed up in \d+ s", line) for line in lines[warming:])
    assert result["workers"][0]["kv_cache"] == ["neuron:0"]
    # Its decode steps replayed the compiled model's decode graphs.
    assert result["workers"][0]["graph_replays"] > 0
    # Inductor generates the RMS norms from vLLM's native form, as on CUDA and the CPU.
    assert result["workers"][0]["rms_norm_priorities"] == [["native"]] * 2
    for prompt_ids, tokens in zip(result["prompt_ids"], result["greedy"]):
        assert tokens == hf_greedy(prompt_ids)
