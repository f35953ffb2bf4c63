"""The estimated Trainium time as a second track in a Chrome/Perfetto trace: for each device
kernel row that Kineto wrote (category "kernel", with the operands csrc/profiler attached as
args), one event on a process of its own, "neuron N estimated (trn2)", in launch order, each
starting no earlier than the measured kernel and no earlier than the previous estimate ends."""

from __future__ import annotations

import json
import os
import time

from ..runtime import config
from ..runtime.profiles import ChipProfile
from .roofline import estimate_activity

ESTIMATE_PID_BASE = 1_000_000  # far above Kineto's device ids and real process ids


def _operands(args: dict, shapes_key: str, dtypes_key: str | None):
    shapes = json.loads(args.get(shapes_key, "[]"))
    dtypes = args[dtypes_key].split(",") if dtypes_key and args.get(dtypes_key) else None
    if dtypes is None:  # outputs: the first input's dtype (the trace does not keep theirs)
        dtypes = [(args.get("input_dtypes") or "Float").split(",")[0]] * len(shapes)
    return [(tuple(s), d) for s, d in zip(shapes, dtypes)]


def add_estimated_track(trace: dict, profile: ChipProfile | None = None,
                        lnc: int | None = None) -> int:
    """Adds the estimated track to a Chrome trace (the dict export_chrome_trace wrote); returns
    the number of estimated events."""
    cfg = config.current()
    profile = profile or cfg.profile
    lnc = lnc or cfg.logical_nc_config
    events = trace.setdefault("traceEvents", [])
    kernels = sorted((e for e in events if e.get("cat") == "kernel" and "input_shapes" in
                      e.get("args", {})), key=lambda e: e["ts"])
    added, clock, devices = [], {}, set()
    for k in kernels:
        args = k["args"]
        est = estimate_activity(k["name"], _operands(args, "input_shapes", "input_dtypes"),
                                _operands(args, "output_shapes", None), profile, lnc)
        device = int(args.get("device", k.get("pid", 0)))
        lane = (device, k.get("tid", 0))
        start = max(float(k["ts"]), clock.get(lane, 0.0))
        dur = est.seconds * 1e6
        clock[lane] = start + dur
        devices.add(device)
        added.append({"ph": "X", "cat": "neuron_estimate", "name": k["name"],
                      "pid": ESTIMATE_PID_BASE + device, "tid": k.get("tid", 0),
                      "ts": start, "dur": dur,
                      "args": {"profile": profile.name, "flops": est.flops, "bytes": est.bytes,
                               "bound": est.bound, "measured_us": k.get("dur", 0),
                               "correlation": args.get("correlation", 0)}})
    for device in sorted(devices):
        added.append({"ph": "M", "name": "process_name", "pid": ESTIMATE_PID_BASE + device,
                      "args": {"name": f"neuron {device} estimated ({profile.name})"}})
        added.append({"ph": "M", "name": "process_sort_index", "pid": ESTIMATE_PID_BASE + device,
                      "args": {"sort_index": ESTIMATE_PID_BASE + device}})
    events.extend(added)
    return sum(1 for e in added if e["ph"] == "X")


def export_chrome_trace(prof, path: str) -> None:
    """prof.export_chrome_trace(path), then the estimated track added to the file."""
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    add_estimated_track(trace)
    with open(path, "w") as f:
        json.dump(trace, f)


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None):
    """torch.profiler.tensorboard_trace_handler's file layout, with the estimated track."""
    def handler(prof) -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{os.uname().nodename}_{os.getpid()}"
        path = os.path.join(dir_name, f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json")
        export_chrome_trace(prof, path)
    return handler
