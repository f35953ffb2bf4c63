"""A battery worker process: `python -m torchneuron.compat.worker MODULE FD THREADS`. MODULE is a
battery's job module, which defines prepare() -> state (run once, before "ready") and
run(state, job, begin, end). The worker reads jobs as JSON lines on stdin and writes JSON lines to
file descriptor FD: "ready" once prepared, "begin" before each case (so the parent knows which
case a crash killed), "end" with its record after it, and "done" with the seconds taken after the
job. Its stdout is not the channel, because ops, models and warnings may print."""

from __future__ import annotations

import importlib
import json
import os
import sys
import time


def main(module: str, fd: int, threads: int) -> None:
    channel = os.fdopen(fd, "w", buffering=1)

    def send(kind: str, payload=None) -> None:
        channel.write(json.dumps([kind, payload], default=str) + "\n")

    import faulthandler

    faulthandler.enable()  # a crash leaves its traceback in the worker log
    import torch

    torch.set_num_threads(threads)
    jobs = importlib.import_module(module)
    state = jobs.prepare()
    send("ready")
    for line in sys.stdin:
        started = time.monotonic()
        jobs.run(state, json.loads(line), lambda case: send("begin", case),
                 lambda case, record: send("end", [case, record]))
        send("done", round(time.monotonic() - started, 3))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
