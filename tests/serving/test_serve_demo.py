"""`make serve-demo` as a new user meets it (torchneuron/serving/demo.py): it says its model is
random before it prints the model's noise, `vllm serve` answers on neuron with Hugging Face's
greedy text on the CPU, the server's log ends without the leak reports CUDA's triton used to
print at every exit, and its stop leaves no shared memory behind."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("vllm")

pytestmark = pytest.mark.slow


def test_demo_says_its_model_is_random_and_answers_as_hf_on_cpu(model_dir, tokenizer,
                                                                 hf_greedy):
    from torchneuron.serving import demo

    segments_before = set(pathlib.Path("/dev/shm").glob("psm_*"))
    done = subprocess.run([sys.executable, "-m", "torchneuron.serving.demo", "--model-dir",
                           str(model_dir)], capture_output=True, text=True, timeout=600,
                          start_new_session=True)
    log = model_dir.with_name("serve-demo.log").read_text()
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n{log[-3000:]}"
    lines = done.stdout.splitlines()
    random_note = next(i for i, line in enumerate(lines) if "seeded random weights" in line)
    answer = next(i for i, line in enumerate(lines) if line.startswith("completion: "))
    assert random_note < answer and "as expected" in lines[random_note]
    assert any("backend=neuron" in line for line in lines), "the server did not run on neuron"

    # The completion is greedy (temperature 0), 12 tokens at most, stopping at end-of-sequence.
    tokens = hf_greedy(tokenizer(demo.COMPLETION_PROMPT).input_ids, demo.MAX_TOKENS)
    if tokenizer.eos_token_id in tokens:
        tokens = tokens[:tokens.index(tokenizer.eos_token_id)]
    assert ast.literal_eval(lines[answer][len("completion: "):]) == tokenizer.decode(tokens)

    assert "server stopped" in lines[-1]
    assert "nanobind" not in log and "libtriton" not in log
    # Stopped with time to drain (server_process.SHUTDOWN_TIMEOUT_S) and to end by itself, so
    # that Python's resource tracker removes what vLLM's processes did not: nothing of the
    # server's is left in /dev/shm (each of its message queues is 160-240 MB).
    assert set(pathlib.Path("/dev/shm").glob("psm_*")) <= segments_before
