"""What the serving tests share: the prompts, a tiny local Llama's limits, and drivers run in
interpreters of their own (servers: torchneuron/serving/server_process.py)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent

# Prompts of different lengths: one word to a paragraph (the longest is chunked at 64 tokens).
PROMPTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog.",
    "Tell me a story about a river that runs through a quiet town.",
    "Count from one to ten: one, two, three,",
    " ".join(["The scheduler decides which requests run in the next step."] * 8),
]
MAX_TOKENS = 12
MAX_MODEL_LEN = 256


def run_script(name: str, *args: str, env: dict | None = None, timeout: float = 600.0) -> str:
    """Runs tests/serving/<name> in a fresh interpreter of this environment (vLLM's engine
    processes are spawned, so its drivers need a `__main__` guard) and returns its stdout."""
    done = subprocess.run([sys.executable, str(HERE / name), *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=timeout,
                          start_new_session=True)
    # vLLM logs to stdout, so its root causes are there, before the driver's traceback.
    assert done.returncode == 0, (f"{name} failed ({done.returncode}):\n"
                                  f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def rms_norm_priorities(worker) -> list[list[str]]:
    """Run in a vLLM worker: the implementations its RMS norms try, in order (vLLM's IR op
    priority; torchneuron/serving/ir_kernels.py)."""
    from vllm import ir
    return [ir.ops.rms_norm.get_priority(), ir.ops.fused_add_rms_norm.get_priority()]
