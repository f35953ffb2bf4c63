"""The one crash-isolating worker pool of both batteries. Units of work run in worker processes
(compat/worker.py) so that no op or model can stop a battery: a worker that crashes (segfault,
abort) or hangs past the case timeout is replaced, the case it was running is recorded as
"crash" or "timeout" in the battery's own record format, and the unit resumes at its next case
where the battery's units have several. A battery describes itself to the pool with a Battery."""

from __future__ import annotations

import collections
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

STARTUP_TIMEOUT_S = 300  # importing torch and a battery's database, on a busy machine
# A worker that dies before it is ready is not a unit's fault (an environment problem, e.g. the
# extension being rebuilt): retried a few times, then the battery stops with the worker's log.
STARTUP_ATTEMPTS = 3
STARTUP_RETRY_DELAY_S = 5
MAX_CRASHES_PER_UNIT = 3  # after that the rest of the unit is recorded as abandoned


@dataclass(frozen=True)
class Lost:
    """How the pool lost a case: status "crash" (with the worker's exit code and the last line
    of its log, the fatal one where there is one) or "timeout" (after timeout_s seconds)."""

    status: str
    exit_code: int | None
    cause: str
    timeout_s: float


@dataclass(frozen=True)
class Battery:
    """What the pool needs from a battery. `worker` is the module a worker process imports: it
    defines prepare() -> state and run(state, job, begin, end) (see compat/worker.py). `job`
    turns (unit, first case) into that JSON job; `lost_record` makes the record of a case lost
    to a crash or a timeout. `abandoned_record` (unit, next case, crashes), for batteries whose
    units have several independent cases: the unit resumes after a lost case until it has
    crashed MAX_CRASHES_PER_UNIT times, then this record ends it. Without it a unit ends at its
    first lost case."""

    worker: str
    job: Callable[[Any, int], dict]
    lost_record: Callable[[Any, int, Lost], dict]
    abandoned_record: Callable[[Any, int, int], dict] | None = None


class _Worker:
    def __init__(self, battery: Battery, threads: int, log_dir: str):
        read_fd, write_fd = os.pipe()
        self.log = tempfile.NamedTemporaryFile(
            "w+", dir=log_dir, prefix="worker-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torchneuron.compat.worker", battery.worker, str(write_fd),
             str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.log,
            pass_fds=(write_fd,), text=True)
        os.close(write_fd)
        self.fd = read_fd
        self.buffer = b""
        self.ready = False
        self.unit = None
        self.case = -1  # the case last begun
        self.ended = False  # whether that case has ended (a crash then hit the next one)
        self.begun = False  # whether this job began any case (else: resuming cannot help)
        self.records: list[dict] = []
        self.crashes = 0
        self.units_done = 0
        self.last_heard = time.monotonic()

    def assign(self, unit, start: int, records: list[dict], crashes: int, job: dict) -> None:
        self.unit, self.case, self.records, self.crashes = unit, start - 1, records, crashes
        self.ended, self.begun = True, False
        self.last_heard = time.monotonic()
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

    def log_lines(self) -> list[str]:
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return [ln.strip() for ln in f if ln.strip()]

    def last_log_line(self) -> str:
        lines = self.log_lines()
        fatal = [ln for ln in lines if ln.startswith(("Fatal Python error", "terminate called"))]
        return (fatal or lines or [""])[-1][:200]

    def stop(self) -> None:
        """Ends the process and frees what it held; stopping twice is harmless."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.log.close()
            os.unlink(self.log.name)


class _Pool:
    def __init__(self, battery: Battery, units: list, case_timeout: float, threads: int,
                 units_per_worker: int | None, on_unit_done, on_case):
        self.battery, self.case_timeout, self.threads = battery, case_timeout, threads
        self.units_per_worker = units_per_worker
        self.on_unit_done, self.on_case = on_unit_done, on_case
        # (unit, first case, records so far, crashes so far): a unit resumed after a crash keeps
        # its records and crash count.
        self.pending = collections.deque((u, 0, [], 0) for u in units)
        self.failed_starts = 0
        self.log_dir = tempfile.mkdtemp(prefix="torchneuron-battery-")

    def new_worker(self) -> _Worker:
        return _Worker(self.battery, self.threads, self.log_dir)

    def run(self, jobs: int) -> None:
        workers = [self.new_worker() for _ in range(min(jobs, len(self.pending)))]
        try:
            while self.pending or any(w.unit is not None for w in workers):
                for w in workers:
                    if w.ready and w.unit is None and self.pending:
                        unit, start, records, crashes = self.pending.popleft()
                        w.assign(unit, start, records, crashes, self.battery.job(unit, start))
                readable, _, _ = select.select([w.fd for w in workers], [], [], 1.0)
                for i, w in enumerate(workers):
                    if w.fd in readable:
                        workers[i] = self.hear(w)
                    elif self.overdue(w):
                        workers[i] = self.replace(w, "timeout")
        finally:
            for w in workers:
                w.stop()
            os.rmdir(self.log_dir)

    def hear(self, w: _Worker) -> _Worker:
        """Handles what a worker said; returns the worker to go on with (a fresh one after a
        crash, or when this one has run its share of units)."""
        msgs = w.messages()
        if msgs is None:
            return self.replace(w, "crash")
        for kind, payload in msgs:
            if kind == "ready":
                w.ready, self.failed_starts = True, 0
            elif kind == "begin":
                w.case, w.ended, w.begun = payload, False, True
                self.on_case(w.unit, payload, w.proc.pid)
            elif kind == "end":
                w.ended = True
                if payload[1] is not None:
                    w.records.append(payload[1])
            elif kind == "done":
                self.on_unit_done(w.unit, w.records, payload)
                w.unit, w.records, w.crashes = None, [], 0
                w.units_done += 1
        if (self.units_per_worker and w.units_done >= self.units_per_worker and w.unit is None
                and self.pending):
            w.stop()  # a fresh process bounds the memory a long run accumulates
            return self.new_worker()
        return w

    def overdue(self, w: _Worker) -> bool:
        limit = self.case_timeout if w.ready else STARTUP_TIMEOUT_S
        return (w.unit is not None or not w.ready) and time.monotonic() - w.last_heard > limit

    def replace(self, w: _Worker, status: str) -> _Worker:
        """Records the case the worker died on, requeues the rest of its unit, starts another."""
        if not w.ready:
            return self.restart(w)
        exit_code = None
        if status == "crash":
            try:
                exit_code = w.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        cause = w.last_log_line() if status == "crash" else ""
        w.stop()
        if w.unit is not None:
            self.lose_case(w, Lost(status, exit_code, cause, self.case_timeout))
        return self.new_worker()

    def lose_case(self, w: _Worker, lost: Lost) -> None:
        case = w.case + 1 if w.ended else w.case
        w.records.append(self.battery.lost_record(w.unit, case, lost))
        crashes = w.crashes + 1
        abandoned = self.battery.abandoned_record
        if abandoned is not None and w.begun and crashes < MAX_CRASHES_PER_UNIT:
            self.pending.appendleft((w.unit, case + 1, w.records, crashes))
            return
        if abandoned is not None and w.begun:
            w.records.append(abandoned(w.unit, case + 1, crashes))
        self.on_unit_done(w.unit, w.records, None)

    def restart(self, w: _Worker) -> _Worker:
        """A worker that died or hung before it was ready: try again, or stop the battery."""
        lines = w.log_lines()
        w.stop()
        self.failed_starts += 1
        if self.failed_starts >= STARTUP_ATTEMPTS:
            raise RuntimeError(f"a battery worker failed to start {self.failed_starts} times; "
                               "its log ends:\n" + "\n".join(lines[-30:]))
        time.sleep(STARTUP_RETRY_DELAY_S)
        return self.new_worker()


def run(units: list, battery: Battery, jobs: int, case_timeout: float,
        on_unit_done: Callable[[Any, list[dict], float | None], None],
        on_case: Callable[[Any, int, int], None] = lambda unit, case, pid: None,
        threads: int = 1, units_per_worker: int | None = None) -> None:
    """Runs every unit in `jobs` worker processes of `threads` torch threads each; calls
    on_unit_done(unit, records, seconds or None) as each one finishes, and on_case(unit, case,
    worker pid) as a case begins. A worker is replaced after `units_per_worker` units."""
    _Pool(battery, units, case_timeout, threads, units_per_worker, on_unit_done,
          on_case).run(jobs)
