"""The model battery on the shared worker pool: each architecture is a unit of one case, run in
a worker process that a crash or a hang cannot take the battery down with. An architecture that
kills its worker or runs past the time limit is recorded as such, and the rest go on in a fresh
worker; a worker is also replaced after `chunk` architectures, which bounds its memory."""

from __future__ import annotations

import logging
import os
import warnings

from .. import pool
from .catalog import Architecture
from .check import NA, STAGES

CRASH = "crash"


def run_all(archs: list[Architecture], timeout_s: float, chunk: int, threads: int,
            progress=None, jobs: int = 1) -> list[dict]:
    """One record per architecture, in the given order; `jobs` workers run side by side."""
    records: dict[str, dict] = {}

    def done(arch: Architecture, recs: list[dict], seconds) -> None:
        records[arch.model_type] = recs[-1]
        if progress:
            progress(recs[-1])

    pool.run(archs, BATTERY, jobs=jobs, case_timeout=timeout_s, on_unit_done=done, threads=threads,
             units_per_worker=chunk)
    return [records[a.model_type] for a in archs]


def _lost_record(arch: Architecture, case: int, lost: pool.Lost) -> dict:
    why = (f"timeout: still running after {lost.timeout_s:.0f} s" if lost.status == "timeout"
           else f"crash: worker exited with code {lost.exit_code}")
    return {"model_type": arch.model_type, "class": arch.class_name, "family": arch.family,
            "head": arch.head, "parameters": None, "float64_allowed": False,
            **{s: NA for s in STAGES}, "build": CRASH, "max_abs_error": {},
            "seconds": {"cpu": 0.0, "neuron": 0.0}, "cause": why, "traceback": None,
            "random_draws": {}}


BATTERY = pool.Battery(worker=__name__, job=lambda arch, start: {"model_type": arch.model_type},
                       lost_record=_lost_record)


# --- in the worker process (compat/worker.py) ----------------------------------------------

def prepare() -> None:
    # Hundreds of tiny random models warn about their own configs; the report says what matters.
    # (Settings for transformers, written before it is imported; torchneuron reads none of them.)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def run(state: None, job: dict, begin, end) -> None:
    from .catalog import by_type
    from .check import check

    begin(0)
    end(0, check(by_type(job["model_type"])))
