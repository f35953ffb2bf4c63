"""The op battery on the shared worker pool: a unit (OpInfo, dtype) becomes a job, a case lost to
a crash or a timeout becomes a record, and in the worker a job runs through runner.UnitRunner."""

from __future__ import annotations

import dataclasses
from typing import Callable

from .. import pool
from .cases import VARIANTS, Unit


def run_units(units: list[Unit], jobs: int, variants, case_timeout: float,
              on_unit_done: Callable[[Unit, list[dict], float | None], None],
              on_case: Callable[[Unit, int, int], None] = lambda unit, case, pid: None,
              threads: int = 1) -> None:
    """Runs every unit; calls on_unit_done(unit, records, seconds) as each one finishes, and
    on_case(unit, case, worker pid) as a case begins."""

    def job(unit: Unit, start: int) -> dict:
        return {"unit": dataclasses.asdict(unit), "start": start, "variants": list(variants)}

    battery = pool.Battery(worker=__name__, job=job, lost_record=_lost_record,
                           abandoned_record=_abandoned_record)
    pool.run(units, battery, jobs, case_timeout, on_unit_done, on_case, threads)


def _lost_record(unit: Unit, case: int, lost: pool.Lost) -> dict:
    what = (f"worker died (exit code {lost.exit_code})" if lost.status == "crash"
            else "no result within the case timeout")
    record = {"case": case, "sample": case // len(VARIANTS),
              "variant": VARIANTS[case % len(VARIANTS)], "status": lost.status,
              "type": lost.status.capitalize(),
              "message": f"{what}{': ' + lost.cause if lost.cause else ''}"}
    record["input"] = _sample_text(unit, record["sample"])
    return record


_databases: dict[str, list] = {}


def _sample_text(unit: Unit, sample: int) -> str:
    """The sample a lost case ran, built again here (on CPU, in this process): a crash names the
    op and the sample that caused it. Loading the databases (seconds) is paid at the first loss."""
    from .runner import describe_sample, first_line

    try:
        if not _databases:
            _databases.update(prepare())
        return describe_sample(unit, sample, _databases)
    except Exception as e:  # noqa: BLE001 - the record stands without its description
        return f"(not described: {type(e).__name__}: {first_line(e)})"


def _abandoned_record(unit: Unit, case: int, crashes: int) -> dict:
    return {"case": case, "sample": -1, "variant": "forward", "status": "abandoned",
            "type": "Abandoned", "message": f"{crashes} crashes; the unit's later cases "
                                            "were not run"}


# --- in the worker process (compat/worker.py) ----------------------------------------------

def prepare() -> dict[str, list]:
    from .cases import databases

    return databases()


def run(dbs: dict[str, list], job: dict, begin, end) -> None:
    from .runner import UnitRunner, first_line

    unit = Unit(**job["unit"])
    try:
        runner = UnitRunner(dbs[unit.db][unit.index], unit, tuple(job["variants"]))
        runner.run(job["start"], begin, end)
    except Exception as e:  # noqa: BLE001 - a broken OpInfo must not stop the worker
        end(job["start"], {"case": job["start"], "sample": -1, "variant": "forward",
                           "status": "sample_error", "type": type(e).__name__,
                           "message": first_line(e)})
