"""The readiness accounting: what this program would cost on Trainium, counted while it runs on
the software NeuronCore (docs/readiness.md).

The C++ side (csrc/aten/Accounting.h) counts at the launch decision, on the calling thread, so
the counts are the same in every eager mode: each op call's shape signature (a new signature of
an op already seen is a recompile of a per-shape-compiling runtime), the calls a Trainium runtime
runs on the host (float64/complex128 arithmetic, sparse layouts, the op-support table's host
fallbacks) with the bytes that would cross the host link and their CPU time, and the host
synchronizations by cause, each with the user's Python line. This module adds what Python sees:
Dynamo's recompiles with their reasons, `dynamic=True` and `mark_dynamic` uses (TorchNeuron's
torch.compile refuses both), and peak device memory against the device's HBM.

Off by default. `start()`/`stop()` nest: `torch.neuron.expect`, the readiness command and
NEURON_ACCOUNTING=1 each hold it on while they need it. `readiness_summary()` is the documented
dict; `measure()` gives one for a block.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import torch

from .._C import launch as _launch_c
from .._C import profiler as _profiler_c
from ..runtime import config

__all__ = ["readiness_summary", "reset_readiness"]

SCHEMA_VERSION = 1

_lock = threading.Lock()
_users = 0  # start() calls not yet stopped
_metrics_base: Any = None  # the newest Dynamo compilation record at the last reset
_dynamic_uses: list[dict[str, str]] = []  # mark_dynamic calls, while on
_original_mark_dynamic = None


def _internal_dirs() -> list[str]:
    """Frames under these directories are not the user's line: torch's and torchneuron's."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [os.path.dirname(os.path.abspath(torch.__file__)) + os.sep, package + os.sep]


def _counting_mark_dynamic(*args: Any, **kwargs: Any) -> Any:
    # The user's line as the C++ side names its findings (installed only while on, so after
    # start() handed it the directories that are "inside").
    location = _profiler_c.user_python_line()
    with _lock:
        _dynamic_uses.append({"kind": "mark_dynamic", "location": location})
    return _original_mark_dynamic(*args, **kwargs)


def _install_mark_dynamic_counter() -> None:
    """Counts torch._dynamo.mark_dynamic calls while the accounting is on (TorchNeuron refuses
    dynamic shapes); the name is put back at stop()."""
    global _original_mark_dynamic
    import torch._dynamo

    # internal: see runtime/torch_internals.py "torch._dynamo.mark_dynamic"
    _original_mark_dynamic = torch._dynamo.mark_dynamic
    torch._dynamo.mark_dynamic = _counting_mark_dynamic


def _remove_mark_dynamic_counter() -> None:
    global _original_mark_dynamic
    import torch._dynamo

    if _original_mark_dynamic is not None and torch._dynamo.mark_dynamic is _counting_mark_dynamic:
        torch._dynamo.mark_dynamic = _original_mark_dynamic
    _original_mark_dynamic = None


# Where the ops a Trainium runtime runs on the host whatever their dtype come from: the
# op-support table (ops/op_support.py, a sibling layer), handed over at registration.
_host_fallback_source: Callable[[], Iterable[tuple[str, str]]] = tuple


def set_host_fallback_source(source: Callable[[], Iterable[tuple[str, str]]]) -> None:
    """`source()` gives (op, reason) pairs: "aten::cumprod" for every overload, or one overload
    "aten::cumprod.out"; it is asked when the accounting starts (cache it)."""
    global _host_fallback_source
    _host_fallback_source = source


def start() -> None:
    """Turns the accounting on (nested calls count; stop() once per start())."""
    global _users
    with _lock:
        _users += 1
        if _users > 1:
            return
    _profiler_c.set_internal_python_dirs(_internal_dirs())
    _launch_c.accounting_set_host_fallback_ops(list(_host_fallback_source()))
    _install_mark_dynamic_counter()
    _launch_c.accounting_set_enabled(True)


def stop() -> None:
    global _users
    with _lock:
        if _users == 0:
            raise RuntimeError("torchneuron accounting: stop() without a matching start()")
        _users -= 1
        if _users > 0:
            return
    _launch_c.accounting_set_enabled(False)
    _remove_mark_dynamic_counter()


def is_enabled() -> bool:
    return bool(_launch_c.accounting_enabled())


def reset_readiness() -> None:
    """Forgets every count and every signature seen, as a new process would start."""
    global _metrics_base
    _launch_c.accounting_reset()
    with _lock:
        _dynamic_uses.clear()
        _metrics_base = _newest_metric()


def _compilation_metrics() -> list[Any]:
    # internal: see runtime/torch_internals.py "torch._dynamo.utils.get_compilation_metrics"
    from torch._dynamo.utils import get_compilation_metrics

    return list(get_compilation_metrics())


def _newest_metric() -> Any:
    """The newest compilation record, or None: a point in Dynamo's record list. The list is
    bounded (it drops its oldest records), so a position in it is no mark; a record is."""
    metrics = _compilation_metrics()
    return metrics[-1] if metrics else None


def _metrics_since(mark: Any) -> list[Any]:
    """The records Dynamo added after `mark` (all of them when `mark` is None or was dropped)."""
    metrics = _compilation_metrics()
    for i in range(len(metrics) - 1, -1, -1):
        if metrics[i] is mark:
            return metrics[i + 1:]
    return metrics


@dataclass
class _Point:
    """The counts at one moment; a block's counts are the difference of two points."""

    records: dict[tuple[str, str, str], tuple]
    metrics: Any  # the newest compilation record then (_newest_metric)
    dynamic_uses: int


def _point() -> _Point:
    records = {(r[0], r[1], r[2]): r for r in _launch_c.accounting_records()}
    with _lock:
        uses = len(_dynamic_uses)
    return _Point(records, _newest_metric(), uses)


def _relative(location: str) -> str:
    cwd = os.getcwd() + os.sep
    return location[len(cwd):] if location.startswith(cwd) else location


def _summarize(before: _Point | None, after: _Point, peak_bytes: int) -> dict[str, Any]:
    """The documented summary (docs/readiness.md) of what happened between two points."""
    fallbacks: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    sites: dict[tuple[str, str], dict[str, Any]] = {}
    for key, (kind, op, location, detail, count, to_host, from_host, ns) in after.records.items():
        if before is not None and key in before.records:
            old = before.records[key]
            count, to_host, from_host, ns = (count - old[4], to_host - old[5],
                                             from_host - old[6], ns - old[7])
        if count <= 0:
            continue
        where = _relative(location)
        if kind == "host_fallback":
            fallbacks.append({"op": op, "location": where, "reason": detail, "calls": count,
                              "bytes_to_host": to_host, "bytes_from_host": from_host,
                              "cpu_seconds": ns / 1e9})
        elif kind == "sync":
            syncs.append({"op": op, "location": where, "cause": detail, "count": count,
                          "bytes_to_host": to_host})
        else:  # "signature" or "recompile": one site per op and line
            site = sites.setdefault((op, where), {"op": op, "location": where, "signatures": 0,
                                                  "recompiles": 0, "first_signature": ""})
            if kind == "signature":
                site["signatures"] += count
                site["first_signature"] = detail  # a recompile's detail is a later signature
            else:
                site["recompiles"] += count
    new_metrics = _metrics_since(before.metrics if before is not None else _metrics_base)
    dynamo_recompiles = [
        {"function": m.co_name, "location": _relative(f"{m.co_filename}:{m.co_firstlineno}"),
         "reason": m.recompile_reason}
        for m in new_metrics if m.recompile_reason]
    with _lock:
        uses = list(_dynamic_uses[before.dynamic_uses if before is not None else 0:])
    dynamic_uses = [dict(use, location=_relative(use["location"])) for use in uses]
    for m in new_metrics:
        config = json.loads(m.dynamo_config) if m.dynamo_config else {}
        if config.get("assume_static_by_default") is False:
            dynamic_uses.append({"kind": "dynamic=True",
                                 "location": _relative(f"{m.co_filename}:{m.co_firstlineno}")})

    by_count = lambda key: lambda row: (-row[key], row["location"], row["op"])  # noqa: E731
    fallbacks.sort(key=by_count("calls"))
    syncs.sort(key=by_count("count"))
    signature_sites = sorted(sites.values(), key=lambda r: (-r["recompiles"], -r["signatures"],
                                                            r["location"], r["op"]))
    by_cause: dict[str, int] = {}
    for row in syncs:
        by_cause[row["cause"]] = by_cause.get(row["cause"], 0) + row["count"]
    shape_recompiles = sum(r["recompiles"] for r in signature_sites)
    hbm = _hbm_bytes()
    return {
        "schema": SCHEMA_VERSION,
        "host_fallbacks": {
            "calls": sum(r["calls"] for r in fallbacks),
            "bytes_to_host": sum(r["bytes_to_host"] for r in fallbacks),
            "bytes_from_host": sum(r["bytes_from_host"] for r in fallbacks),
            "cpu_seconds": sum(r["cpu_seconds"] for r in fallbacks),
            "ops": fallbacks,
        },
        "syncs": {"count": sum(by_cause.values()), "by_cause": by_cause, "sites": syncs},
        "signatures": {"count": sum(r["signatures"] for r in signature_sites),
                       "recompiles": shape_recompiles, "sites": signature_sites},
        "dynamo": {"recompiles": len(dynamo_recompiles), "reasons": dynamo_recompiles,
                   "dynamic_shapes": dynamic_uses},
        "recompiles": shape_recompiles + len(dynamo_recompiles),
        "memory": {"peak_bytes": peak_bytes, "hbm_bytes": hbm,
                   "fits": None if hbm is None else peak_bytes <= hbm},
    }


def _hbm_bytes() -> int | None:
    """One device's HBM (every device of a process has the same), or None when the
    configuration cannot be read (the summary still reports the counts)."""
    try:
        return config.current().hbm_bytes_per_device
    except config.ConfigError:
        return None


def _peak_now() -> int:
    if not torch.neuron.is_initialized():
        return 0
    return max((torch.neuron.max_memory_allocated(d) for d in range(torch.neuron.device_count())),
               default=0)


def readiness_summary() -> dict[str, Any]:
    """What the accounting counted since it first started (or since reset_readiness()), as the
    documented dict (docs/readiness.md#the-summary): host fallbacks, host syncs by cause, shape
    signatures and recompiles, Dynamo's recompiles and dynamic-shape uses, and peak memory (the
    allocator's peak since its last reset) against the device's HBM."""
    return _summarize(None, _point(), _peak_now())


@dataclass
class Block:
    """A measured block: `summary` is set when it ends."""

    summary: dict[str, Any] = field(default_factory=dict)
    start_point: _Point | None = None
    peak_seen: int = 0  # peaks of nested blocks' resets, which the allocator's peak forgets


_blocks = threading.local()


def _reset_peaks() -> None:
    if torch.neuron.is_initialized():
        for d in range(torch.neuron.device_count()):
            torch.neuron.reset_peak_memory_stats(d)


@contextlib.contextmanager
def measure() -> Iterator[Block]:
    """Turns the accounting on for the block and gives its summary when it ends. The block's
    peak memory is measured by resetting the allocator's peak statistics at its start (as
    torch.neuron.reset_peak_memory_stats does); an enclosing block keeps the peaks it saw."""
    stack = getattr(_blocks, "stack", None)
    if stack is None:
        stack = _blocks.stack = []
    if stack:
        stack[-1].peak_seen = max(stack[-1].peak_seen, _peak_now())
    block = Block()
    start()
    try:
        _reset_peaks()
        block.start_point = _point()
        stack.append(block)
        yield block
    finally:
        stack.pop()
        peak = max(_peak_now(), block.peak_seen)
        block.summary = _summarize(block.start_point, _point(), peak)
        if stack:
            stack[-1].peak_seen = max(stack[-1].peak_seen, peak)
        stop()


def format_summary(summary: dict[str, Any], limit: int = 5) -> str:
    """The summary as a few lines for a terminal."""
    fb, sy, sig = summary["host_fallbacks"], summary["syncs"], summary["signatures"]
    lines = [f"host fallbacks: {fb['calls']} calls, {fb['bytes_to_host']} bytes to the host, "
             f"{fb['bytes_from_host']} back, {fb['cpu_seconds']:.3f} s of CPU"]
    lines += [f"  {r['op']} ({r['reason']}) at {r['location'] or '?'}: {r['calls']}x"
              for r in fb["ops"][:limit]]
    causes = ", ".join(f"{k} {v}" for k, v in sy["by_cause"].items()) or "none"
    lines.append(f"host syncs: {sy['count']} ({causes})")
    lines += [f"  {r['cause']} ({r['op']}) at {r['location'] or '?'}: {r['count']}x"
              for r in sy["sites"][:limit]]
    lines.append(f"shape signatures: {sig['count']}, recompiles of a per-shape runtime: "
                 f"{sig['recompiles']}; Dynamo recompiles: {summary['dynamo']['recompiles']}; "
                 f"dynamic-shape uses: {len(summary['dynamo']['dynamic_shapes'])}")
    lines += [f"  {r['op']} at {r['location'] or '?'}: {r['recompiles']} recompiles"
              for r in sig["sites"][:limit] if r["recompiles"]]
    mem = summary["memory"]
    if mem["hbm_bytes"]:
        lines.append(f"peak memory: {mem['peak_bytes']} of {mem['hbm_bytes']} bytes of HBM "
                     f"({'fits' if mem['fits'] else 'does not fit'})")
    return "\n".join(lines)


def print_summary_at_exit() -> None:
    """NEURON_ACCOUNTING=1: the accounting on for the rest of the process, its summary on
    stderr at exit."""
    start()
    atexit.register(lambda: print("torchneuron readiness (NEURON_ACCOUNTING=1):\n" +
                                  format_summary(readiness_summary()), file=sys.stderr))
