"""A server started as a process group on 127.0.0.1, waited for until its /health answers, and
stopped with its whole group on the way out, whatever happened in between. Used by the serving
demo (`make serve-demo`), the serving tests and the serving benchmark."""

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


# vLLM's default shutdown (`--shutdown-timeout 0`) aborts: it force-kills its engine and worker
# processes before they unlink the shared memory and locks of their message queues. A few seconds
# to drain lets most of them clean up; Python's resource tracker removes the rest (and says so in
# the log) if it is not killed first (stop_process_group).
SHUTDOWN_TIMEOUT_S = 10


def vllm_serve_command(model: str | os.PathLike, port: int, *options: str) -> list[str]:
    """`vllm serve` of this interpreter's environment, on 127.0.0.1 only, stopping cleanly."""
    vllm = pathlib.Path(sys.executable).with_name("vllm")
    return [str(vllm), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
            "--shutdown-timeout", str(SHUTDOWN_TIMEOUT_S), *options]


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
    """SIGTERM to the whole group (as Ctrl-C signals a terminal's), then time for the group to
    end by itself: the leader may exit while its engine processes still unlink their shared
    memory, and Python's resource tracker (also in the group) removes what they left; killing
    them then would leave the segments in /dev/shm. What is left after `grace` is killed."""
    deadline = time.monotonic() + grace
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(max(0.0, deadline - time.monotonic()))
    while time.monotonic() < deadline and _group_alive(process.pid):
        time.sleep(0.1)
    # Whatever the leader did, none of its children outlives it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group is still running (not only a zombie nobody reaped)."""
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # state, ppid, pgrp
            return True
    return False
