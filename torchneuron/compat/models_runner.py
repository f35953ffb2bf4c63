"""Runs architectures in worker processes with a progress bar. Each worker takes a chunk; an
architecture that kills its worker (crash) or runs past the time limit (hang) is recorded as
such, and the rest of the chunk goes on in a new worker. Never fatal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from .models_catalog import Architecture
from .models_check import NA, STAGES

CRASH = "crash"


def _lost_record(arch: Architecture, why: str) -> dict:
    return {"model_type": arch.model_type, "class": arch.class_name, "family": arch.family,
            "head": arch.head, "parameters": None, "float64_allowed": False,
            **{s: NA for s in STAGES}, "build": CRASH, "max_abs_error": {},
            "seconds": {"cpu": 0.0, "neuron": 0.0}, "cause": why, "traceback": None}


def _events(path: str, offset: int) -> tuple[list[dict], int]:
    with open(path) as f:
        f.seek(offset)
        text = f.read()
    complete = text[: text.rfind("\n") + 1]  # a half-written last line waits for the next poll
    return [json.loads(line) for line in complete.splitlines() if line.strip()], offset + len(complete)


def run_all(archs: list[Architecture], timeout_s: float, chunk: int, threads: int,
            progress=None) -> list[dict]:
    """One record per architecture, in the given order."""
    by_type = {a.model_type: a for a in archs}
    pending = [a.model_type for a in archs]
    records: dict[str, dict] = {}
    startup_failures = 0
    with tempfile.TemporaryDirectory(prefix="torchneuron-models-") as tmp:
        while pending:
            batch, pending = pending[:chunk], pending[chunk:]
            results = os.path.join(tmp, f"results-{len(records)}.jsonl")
            errors = os.path.join(tmp, f"stderr-{len(records)}.txt")
            open(results, "w").close()
            with open(errors, "w") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "torchneuron.compat.models_worker", results,
                     str(threads), *batch], stdout=subprocess.DEVNULL, stderr=err)
            offset, current, started = 0, None, time.monotonic()
            while True:
                events, offset = _events(results, offset)
                for e in events:
                    if e["event"] == "start":
                        current, started = e["model_type"], time.monotonic()
                    else:
                        records[e["record"]["model_type"]] = e["record"]
                        current = None
                        if progress:
                            progress(e["record"])
                if proc.poll() is not None and not _events(results, offset)[0]:
                    break
                if current and time.monotonic() - started > timeout_s:
                    proc.kill()
                    proc.wait()
                    break
                time.sleep(0.1)
            rest = [t for t in batch if t not in records]
            if not rest:
                startup_failures = 0
                continue
            if current is None:
                # The worker died before starting an architecture: not the model's fault (an
                # environment problem, e.g. the extension being rebuilt). Retry once, then stop.
                startup_failures += 1
                if startup_failures > 2:
                    with open(errors) as f:
                        raise RuntimeError("the battery's worker cannot start:\n" + f.read()[-3000:])
                time.sleep(5)
                pending = rest + pending
                continue
            startup_failures = 0
            timed_out = proc.returncode == -9 and time.monotonic() - started > timeout_s
            why = (f"timeout: still running after {timeout_s:.0f} s" if timed_out
                   else f"crash: worker exited with code {proc.returncode}")
            records[current] = _lost_record(by_type[current], why)
            if progress:
                progress(records[current])
            pending = [t for t in rest if t != current] + pending
    return [records[a.model_type] for a in archs]
