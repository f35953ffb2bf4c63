"""`torch.neuron.expect`: a contract on what a block may cost on Trainium, checked at the end of
the block against the readiness accounting (device/accounting.py):

    with torch.neuron.expect(host_fallbacks=0, syncs=0, recompiles=0, peak_memory="20GiB"):
        train_step()

raises `torch.neuron.ExpectationError` (an AssertionError) naming each violation with its ops
and the user's file:line. Nothing is counted away: every key is a bound on the block's own counts.
NEURON_EXPECT applies one contract to a whole process (checked at exit) or to every test of a
pytest run (device/contract_pytest.py).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from typing import Any, Iterator

from ..runtime import config
from . import accounting

__all__ = ["expect", "ExpectationError"]


class ExpectationError(AssertionError):
    """A torch.neuron.expect block cost more than its contract allows."""


def _bound_bytes(value: Any) -> int:
    if isinstance(value, str):
        return config.parse_bytes("peak_memory", value)
    return value


def validate(bounds: dict[str, Any]) -> dict[str, int]:
    """The bounds as whole numbers; TypeError for an unknown key or a value of the wrong type,
    ValueError for a negative bound or an unreadable byte count."""
    accepted = ", ".join(config.EXPECTATION_KEYS)
    checked: dict[str, int] = {}
    for key, value in bounds.items():
        if key not in config.EXPECTATION_KEYS:
            raise TypeError(f"torch.neuron.expect() got an unexpected keyword argument {key!r}; "
                            f"accepted: {accepted}")
        if key == "peak_memory" and isinstance(value, str):
            value = _bound_bytes(value)  # ConfigError, a ValueError, names the text
        if isinstance(value, bool) or not isinstance(value, int):
            kind = "a whole number of bytes or a size such as '20GiB'" if key == "peak_memory" \
                else "a whole number"
            raise TypeError(f"torch.neuron.expect(): {key} must be {kind}, not "
                            f"{type(value).__name__} {value!r}")
        if value < 0:
            raise ValueError(f"torch.neuron.expect(): {key}={value} is negative; a bound is 0 or "
                             "more")
        checked[key] = value
    return checked


def _sites(rows: list[dict[str, Any]], text, limit: int = 10) -> list[str]:
    lines = [f"    {text(r)}" for r in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"    ... and {len(rows) - limit} more")
    return lines


def _at(row: dict[str, Any]) -> str:
    return row["location"] or "(no Python line: a device thread)"


def violations(summary: dict[str, Any], bounds: dict[str, int]) -> list[str]:
    """One paragraph per bound the summary exceeds, naming ops and lines."""
    out: list[str] = []
    fb, sy, sig, dyn = (summary["host_fallbacks"], summary["syncs"], summary["signatures"],
                        summary["dynamo"])
    if "host_fallbacks" in bounds and fb["calls"] > bounds["host_fallbacks"]:
        out.append("\n".join([
            f"  host_fallbacks: {fb['calls']} > {bounds['host_fallbacks']} (calls Trainium runs "
            f"on the host: {fb['bytes_to_host']} bytes to the host, {fb['bytes_from_host']} back)",
            *_sites(fb["ops"], lambda r: f"{r['op']} ({r['reason']}) at {_at(r)}: "
                                         f"{r['calls']} calls")]))
    if "syncs" in bounds and sy["count"] > bounds["syncs"]:
        out.append("\n".join([
            f"  syncs: {sy['count']} > {bounds['syncs']} (the host waits for the device)",
            *_sites(sy["sites"], lambda r: f"{r['cause']} ({r['op']}) at {_at(r)}: "
                                           f"{r['count']}x")]))
    if "recompiles" in bounds and summary["recompiles"] > bounds["recompiles"]:
        lines = [f"  recompiles: {summary['recompiles']} > {bounds['recompiles']} "
                 f"({sig['recompiles']} new shapes of ops already compiled, "
                 f"{dyn['recompiles']} Dynamo recompiles)"]
        lines += _sites([r for r in sig["sites"] if r["recompiles"]],
                        lambda r: f"{r['op']} at {_at(r)}: {r['recompiles']} new shapes "
                                  f"(first: {r['first_signature']})")
        lines += _sites(dyn["reasons"], lambda r: f"Dynamo: {r['function']} at {r['location']}: "
                                                  f"{r['reason']}")
        out.append("\n".join(lines))
    if "signatures" in bounds and sig["count"] > bounds["signatures"]:
        out.append("\n".join([
            f"  signatures: {sig['count']} > {bounds['signatures']} (op shapes a per-shape "
            f"runtime compiles)",
            *_sites(sig["sites"], lambda r: f"{r['op']} at {_at(r)}: {r['signatures']}")]))
    if "dynamic_shapes" in bounds and len(dyn["dynamic_shapes"]) > bounds["dynamic_shapes"]:
        out.append("\n".join([
            f"  dynamic_shapes: {len(dyn['dynamic_shapes'])} > {bounds['dynamic_shapes']} "
            f"(TorchNeuron's torch.compile refuses dynamic=True and mark_dynamic)",
            *_sites(dyn["dynamic_shapes"], lambda r: f"{r['kind']} at {r['location']}")]))
    mem = summary["memory"]
    if "peak_memory" in bounds and mem["peak_bytes"] > bounds["peak_memory"]:
        out.append(f"  peak_memory: {mem['peak_bytes']} bytes > {bounds['peak_memory']} "
                   f"(device HBM: {mem['hbm_bytes']} bytes)")
    return out


def check(summary: dict[str, Any], bounds: dict[str, int], what: str) -> None:
    found = violations(summary, bounds)
    if found:
        raise ExpectationError(f"{what}: {len(found)} expectation(s) not met\n" +
                               "\n".join(found))


@contextlib.contextmanager
def expect(**bounds: Any) -> Iterator[accounting.Block]:
    """Checks, at the end of the block, that it cost at most `bounds` on Trainium: any of
    host_fallbacks, syncs, recompiles (new shapes of ops already seen plus Dynamo recompiles),
    signatures, dynamic_shapes (dynamic=True and mark_dynamic uses), and peak_memory (bytes, or
    a size such as "20GiB"). Raises ExpectationError naming each violation. Yields the block,
    whose `summary` (readiness_summary's dict) is set when it ends. A block that raises is not
    checked: its own exception propagates."""
    checked = validate(bounds)
    with accounting.measure() as block:
        yield block
    check(block.summary, checked, "torch.neuron.expect")


def apply_setting(settings: Any) -> None:
    """NEURON_ACCOUNTING=1 and NEURON_EXPECT, at the first device use (the configuration's
    `accounting` and `expect`): the accounting on for the rest of the process, with a summary on
    stderr at exit, or the contract checked at exit (a pytest run checks it per test instead:
    device/contract_pytest.py)."""
    if settings.accounting:
        accounting.print_summary_at_exit()
    if settings.expect:
        apply_process_contract(dict(settings.expect))


# NEURON_EXPECT for a whole process: checked at exit. A pytest run checks every test instead.
_process_contract: dict[str, int] | None = None
per_test = False  # set by the pytest plugin (device/contract_pytest.py)


def apply_process_contract(bounds: dict[str, int]) -> None:
    global _process_contract
    if per_test or _process_contract is not None:
        return
    _process_contract = bounds
    accounting.start()
    atexit.register(_check_at_exit)


def _check_at_exit() -> None:
    global _process_contract
    bounds, _process_contract = _process_contract, None
    if bounds is None:
        return
    try:
        check(accounting.readiness_summary(), bounds, "NEURON_EXPECT")
    except ExpectationError as e:
        print(f"torchneuron: {e}", file=sys.stderr)
        # An exit handler cannot change the exit status, so this one ends the process with 1,
        # after the other exit handlers ran (this one, called again, returns at once).
        atexit._run_exitfuncs()
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(1)
