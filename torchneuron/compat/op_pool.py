"""Runs battery units in worker processes (op_worker) so that no op can stop the battery: a
worker that crashes (segfault, abort) or hangs past the case timeout is replaced, the case it
was running is recorded as "crash" or "timeout", and the unit resumes at the next case."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from typing import Callable

from .op_cases import VARIANTS, Unit

STARTUP_TIMEOUT_S = 300  # importing torch and the OpInfo database, on a busy machine
MAX_CRASHES_PER_UNIT = 3  # after that the rest of the unit is recorded as abandoned


class _Worker:
    def __init__(self, threads: int, log_dir: str):
        read_fd, write_fd = os.pipe()
        self.log = tempfile.NamedTemporaryFile(
            "w+", dir=log_dir, prefix="op-worker-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torchneuron.compat.op_worker", str(write_fd), str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.log,
            pass_fds=(write_fd,), text=True)
        os.close(write_fd)
        self.fd = read_fd
        self.buffer = b""
        self.ready = False
        self.unit: Unit | None = None
        self.case = -1  # the case last begun
        self.ended = False  # whether that case has ended (a crash then hit the next one)
        self.records: list[dict] = []
        self.crashes = 0
        self.last_heard = time.monotonic()

    def assign(self, unit: Unit, start: int, records: list[dict], crashes: int,
               variants) -> None:
        self.unit, self.case, self.records, self.crashes = unit, start - 1, records, crashes
        self.ended = True
        self.begun = False  # whether this job began any case (else: resuming cannot help)
        self.last_heard = time.monotonic()
        job = {"unit": dataclasses.asdict(unit), "start": start, "variants": list(variants)}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def messages(self) -> list | None:
        """Complete messages now readable; None when the worker has closed its channel."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        self.last_heard = time.monotonic()
        return [json.loads(line) for line in lines if line]

    def last_log_line(self) -> str:
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
        fatal = [ln for ln in lines if ln.startswith(("Fatal Python error", "terminate called"))]
        return (fatal or lines or [""])[-1][:200]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.fd)
        self.log.close()
        os.unlink(self.log.name)


def run_units(units: list[Unit], jobs: int, variants, case_timeout: float,
              on_unit_done: Callable[[Unit, list[dict], float], None],
              on_case: Callable[[Unit, int, int], None] = lambda unit, case, pid: None,
              threads: int = 1) -> None:
    """Runs every unit; calls on_unit_done(unit, records, seconds) as each one finishes, and
    on_case(unit, case, worker pid) as a case begins."""
    # (unit, first case, records so far, crashes so far): a unit resumed after a crash keeps
    # its records and crash count.
    pending = collections.deque((u, 0, [], 0) for u in units)
    log_dir = tempfile.mkdtemp(prefix="torchneuron-battery-")
    workers = [_Worker(threads, log_dir) for _ in range(min(jobs, len(units)))]
    try:
        while pending or any(w.unit is not None for w in workers):
            for w in workers:
                if w.ready and w.unit is None and pending:
                    w.assign(*pending.popleft(), variants)
            readable, _, _ = select.select([w.fd for w in workers], [], [], 1.0)
            for i, w in enumerate(workers):
                if w.fd in readable:
                    msgs = w.messages()
                    if msgs is None:
                        workers[i] = _replace(w, "crash", pending, threads, log_dir,
                                              on_unit_done)
                        continue
                    for kind, payload in msgs:
                        if kind == "ready":
                            w.ready = True
                        elif kind == "begin":
                            w.case, w.ended, w.begun = payload, False, True
                            on_case(w.unit, payload, w.proc.pid)
                        elif kind == "end":
                            w.ended = True
                            if payload[1] is not None:
                                w.records.append(payload[1])
                        elif kind == "done":
                            on_unit_done(w.unit, w.records, payload)
                            w.unit, w.records, w.crashes = None, [], 0
                elif _overdue(w, case_timeout):
                    workers[i] = _replace(w, "timeout", pending, threads, log_dir, on_unit_done)
    finally:
        for w in workers:
            w.stop()
        os.rmdir(log_dir)


def _overdue(w: _Worker, case_timeout: float) -> bool:
    limit = case_timeout if w.ready else STARTUP_TIMEOUT_S
    return (w.unit is not None or not w.ready) and time.monotonic() - w.last_heard > limit


def _replace(w: _Worker, status: str, pending, threads, log_dir, on_unit_done) -> _Worker:
    """Records the case the worker died on, requeues the rest of its unit, starts another."""
    if not w.ready:
        w.stop()
        raise RuntimeError(f"a battery worker failed to start: {w.last_log_line()}")
    exit_code = None
    if status == "crash":
        try:
            exit_code = w.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    cause = w.last_log_line() if status == "crash" else ""
    w.stop()
    if w.unit is not None:
        case = w.case + 1 if w.ended else w.case
        what = (f"worker died (exit code {exit_code})" if status == "crash"
                else "no result within the case timeout")
        w.records.append({"case": case, "sample": case // len(VARIANTS),
                          "variant": VARIANTS[case % len(VARIANTS)], "status": status,
                          "type": status.capitalize(),
                          "message": f"{what}{': ' + cause if cause else ''}"})
        crashes = w.crashes + 1
        if crashes >= MAX_CRASHES_PER_UNIT or not w.begun:
            if w.begun:
                w.records.append({"case": case + 1, "sample": -1, "variant": "forward",
                                  "status": "abandoned", "type": "Abandoned",
                                  "message": f"{crashes} crashes; the unit's later cases "
                                             "were not run"})
            on_unit_done(w.unit, w.records, None)
        else:
            pending.appendleft((w.unit, case + 1, w.records, crashes))
    return _Worker(threads, log_dir)
