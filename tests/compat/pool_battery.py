"""A battery made for testing the shared worker pool (torchneuron/compat/pool.py): a unit is
(name, actions), one action per case, and the worker does what each action says: "ok" records a
pass with the worker's pid, "segv" kills the worker, "hang" sleeps past any case timeout, and
"meet:DIR:N" passes once N workers have reached it at the same time (else it hangs). With
POOL_BATTERY_BROKEN set the worker fails before it is ready."""

import os
import signal
import time

from torchneuron.compat import pool


def job(unit, start: int) -> dict:
    return {"unit": list(unit), "start": start}


def lost_record(unit, case: int, lost: pool.Lost) -> dict:
    return {"case": case, "status": lost.status, "exit_code": lost.exit_code,
            "timeout_s": lost.timeout_s}


def abandoned_record(unit, case: int, crashes: int) -> dict:
    return {"case": case, "status": "abandoned", "crashes": crashes}


RESUMING = pool.Battery(worker=__name__, job=job, lost_record=lost_record,
                        abandoned_record=abandoned_record)
ONE_CASE = pool.Battery(worker=__name__, job=job, lost_record=lost_record)


def prepare() -> None:
    if os.environ.get("POOL_BATTERY_BROKEN"):
        raise RuntimeError("this worker cannot start")


def run(state, job: dict, begin, end) -> None:
    name, actions = job["unit"]
    for case in range(job["start"], len(actions)):
        begin(case)
        if actions[case] == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif actions[case] == "hang":
            time.sleep(600)
        elif actions[case].startswith("meet:"):
            _meet(*actions[case].split(":")[1:])
        end(case, {"case": case, "status": "pass", "pid": os.getpid()})


def _meet(folder: str, count: str) -> None:
    open(os.path.join(folder, str(os.getpid())), "w").close()
    while len(os.listdir(folder)) < int(count):
        time.sleep(0.05)
