"""A battery worker process: `python -m torchneuron.compat.op_worker FD THREADS`. Reads units as JSON
lines on stdin, runs them (op_runner) and writes JSON lines to file descriptor FD: "begin" before
each case (so the parent knows which case a crash killed), "end" with its record after it, and
"done" after the unit. Its stdout is
not the channel, because ops and warnings may print."""

from __future__ import annotations

import json
import os
import sys
import time


def main(fd: int, threads: int) -> None:
    channel = os.fdopen(fd, "w", buffering=1)

    def send(kind: str, payload=None) -> None:
        channel.write(json.dumps([kind, payload], default=str) + "\n")

    import faulthandler

    faulthandler.enable()  # a crash leaves its traceback in the worker log
    import torch

    from .op_cases import Unit, databases
    from .op_runner import UnitRunner, first_line

    torch.set_num_threads(threads)
    dbs = databases()
    send("ready")
    for line in sys.stdin:
        job = json.loads(line)
        unit = Unit(**job["unit"])
        started = time.monotonic()
        try:
            runner = UnitRunner(dbs[unit.db][unit.index], unit, tuple(job["variants"]))
            runner.run(job["start"], lambda case: send("begin", case),
                       lambda case, rec: send("end", [case, rec]))
        except Exception as e:  # noqa: BLE001 - a broken OpInfo must not stop the worker
            send("end", [job["start"], {"case": job["start"], "sample": -1, "variant": "forward",
                                        "status": "sample_error", "type": type(e).__name__,
                                        "message": first_line(e)}])
        send("done", round(time.monotonic() - started, 3))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
