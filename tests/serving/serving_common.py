"""What the serving tests share: the prompts, a tiny local Llama's limits, servers started and
always stopped on 127.0.0.1, and drivers run in interpreters of their own."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(command: list[str], port: int, log_path: pathlib.Path, env: dict | None = None,
           startup_timeout: float = 420.0):
    """Starts `command` (a server on 127.0.0.1:`port`) in its own process group, waits until
    /health answers, yields its base URL, and stops the whole group on the way out, failure
    or not. The server's output goes to `log_path`; a failed start shows its tail."""
    log = open(log_path, "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, **(env or {})}, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with {process.returncode}:\n"
                                   f"{log_path.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"server not up after {startup_timeout:.0f} s:\n"
                                   f"{log_path.read_text()[-4000:]}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(base + "/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            time.sleep(1)
        yield base
    finally:
        stop_process_group(process)
        log.close()


def stop_process_group(process: subprocess.Popen, grace: float = 30.0) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    # Whatever the leader did, no child of it outlives the test.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


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
