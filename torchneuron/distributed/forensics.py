"""Errors that name the rank that broke a collective ("likely culprit: rank N"), the collective
and where every rank's flight-recorder dump was written.

Where the culprit comes from: the agreement check (agreement.py) exchanges a fingerprint of each
collective between all ranks before gloo starts it, so a rank waiting for a collective knows
which peers sent theirs:
- a peer whose fingerprint never came within the timeout has not reached this collective (it
  skipped one before, or is stuck in its own code): the culprit;
- a peer whose connection closed is gone (killed, crashed): the culprit;
- peers that reached it with another collective or other tensors: the ranks in the minority
  (with an even split there is no likely culprit, and the message says so).

The rank that gives up dumps its recorder (flight_recorder.py), reports to the others through
the rendezvous store (their watchdog threads dump theirs and keep the verdict, watchdog.py), and
waits up to ACK_WAIT_S for their dumps before it raises."""

from __future__ import annotations

import json
import os
import socket
import time
from collections import Counter

import torch.distributed as dist

from . import flight_recorder, watchdog

ACK_WAIT_S = 2.0


def _global(group: dist.ProcessGroup, group_rank: int) -> int:
    return dist.get_global_rank(group, group_rank) if group != dist.group.WORLD else group_rank


def _ranks(group: dist.ProcessGroup) -> list[int]:
    return [_global(group, r) for r in range(group.size())]


def minority(rows: list[tuple]) -> list[int] | None:
    """The indices whose row differs from the one most ranks have; None on an even split."""
    counts = Counter(rows).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    majority = counts[0][0]
    return [i for i, row in enumerate(rows) if row != majority]


def _dump_paths(group: dist.ProcessGroup, mine: str | None, others: dict[int, dict],
                gone: set[int]) -> str:
    me, host = dist.get_rank(), socket.gethostname()
    parts = []
    for r in _ranks(group):
        if r == me:
            parts.append(f"rank {r}: {mine}" if mine else f"rank {r}: none (the dump failed)")
        elif r in others:
            where = others[r]
            at = "" if where["host"] == host else f" on {where['host']}"
            parts.append(f"rank {r}: {where['path']}{at}")
        elif r in gone:
            parts.append(f"rank {r}: none (its process is gone)")
        else:
            parts.append(f"rank {r}: none (no answer within {ACK_WAIT_S:.0f} s)")
    folder = os.path.dirname(mine or flight_recorder.dump_prefix())
    return (f"Flight recorder dumps: {', '.join(parts)}; read them together with "
            f"`python -m torch.distributed.flight_recorder.fr_trace {folder or '.'}`")


def _collective(op_name: str, group: dist.ProcessGroup, entry: dict | None) -> str:
    seq = f"#{entry['collective_seq_id']} " if entry is not None else ""
    return (f"c10d::{op_name} ({seq}of group '{group.group_name}', ranks "
            f"{_ranks(group)})")


def _post(group: dist.ProcessGroup, message: str, gone: set[int]) -> dict[int, dict]:
    """Tells the group's other ranks (their watchdogs dump and keep the message) and returns the
    dumps they wrote within ACK_WAIT_S: global rank -> {path, host}."""
    # internal: see runtime/torch_internals.py "distributed_c10d._get_default_store"
    store = watchdog.own_client(dist.distributed_c10d._get_default_store())
    me = dist.get_rank()
    others = [r for r in _ranks(group) if r != me and r not in gone]
    if store is None:
        return {}
    try:
        number = store.add(watchdog.COUNT_KEY, 1)
        store.set(f"{watchdog.PREFIX}/incident/{number}", json.dumps(
            {"group": group.group_name, "reporter": me, "ranks": _ranks(group),
             "message": message}))
    except Exception:  # noqa: BLE001 - the store's host may be the rank that died
        return {}
    found: dict[int, dict] = {}
    deadline = time.monotonic() + ACK_WAIT_S
    while len(found) < len(others) and time.monotonic() < deadline:
        for r in others:
            if r in found:
                continue
            key = f"{watchdog.PREFIX}/incident/{number}/dump/{r}"
            try:
                if store.check([key]):
                    found[r] = json.loads(store.get(key).decode())
            except Exception:  # noqa: BLE001
                return found
        time.sleep(0.05)
    return found


def _dump() -> tuple[str | None, dict]:
    try:
        return flight_recorder.dump()
    except Exception:  # noqa: BLE001 - the error still names the culprit
        return None, {}


# group name -> the verdict of its first failure: later collectives of the broken group repeat it
# rather than report again.
_verdicts: dict[str, str] = {}


def peers_failed(op_name: str, group: dist.ProcessGroup, reason: str, missing: list[int],
                 gone: list[int]) -> dist.DistBackendError:
    """The error of a collective whose peers did not all arrive (group ranks `missing` sent
    nothing within the timeout, `gone` closed their connection)."""
    earlier = _verdicts.get(group.group_name)
    if earlier is not None and not missing and not gone:
        return dist.DistBackendError(f"neuron backend: c10d::{op_name} on rank "
                                     f"{dist.get_rank()}: {reason}; {earlier}")
    flight_recorder.gave_up_waiting(group.group_name)
    flight_recorder.group_failed(group)
    g_missing = [_global(group, r) for r in missing]
    g_gone = [_global(group, r) for r in gone]
    path, completed = _dump()
    what = _collective(op_name, group, flight_recorder.position(completed, group.group_name))
    why = [f"rank {r} (its process is gone: connection closed)" for r in g_gone]
    why += [f"rank {r} (it has not reached this collective)" for r in g_missing]
    verdict = ("likely culprit: " + ", ".join(why)) if why else "no likely culprit found"
    head = f"neuron backend: {what} failed on rank {dist.get_rank()}: {reason}; {verdict}"
    others = _post(group, f"rank {dist.get_rank()} reported: {head}", set(g_gone))
    paths = _dump_paths(group, path, others, set(g_gone))
    _verdicts.setdefault(group.group_name, f"{verdict} (at {what}). {paths}")
    return dist.DistBackendError(f"{head}. {paths}")


# gloo's words for a collective that can no longer complete (its transport, gloo/transport/tcp).
_BROKEN = ("Timed out waiting", "Connection closed by peer", "Connection reset by peer")


def breaks_group(error: BaseException) -> bool:
    """Whether gloo's error leaves the group broken (a timeout, a lost peer), unlike an
    argument it refuses (a reduce op, a dtype), which fails the call alone."""
    return isinstance(error, dist.DistBackendError) or any(w in str(error) for w in _BROKEN)


def gloo_failed(op_name: str, group: dist.ProcessGroup, error: RuntimeError) -> RuntimeError:
    """A collective that passed the check and failed inside gloo (a timeout, a lost peer): the
    peers whose connection to this rank closed are the likely culprits."""
    from . import agreement_channel

    channel = agreement_channel._channels.get(group.group_name)
    gone = channel.gone_peers() if isinstance(channel, agreement_channel.Channel) else []
    return peers_failed(op_name, group, str(error).strip().splitlines()[0], [], gone)


def mismatched(op_name: str, group: dist.ProcessGroup, problem: str,
               culprits: list[int] | None) -> RuntimeError:
    """The error of a collective the ranks called differently (the group stays usable): every
    rank sees the mismatch itself and dumps its own recorder."""
    path, completed = _dump()
    flight_recorder.done_waiting(group.group_name)
    what = _collective(op_name, group, flight_recorder.position(completed, group.group_name))
    if culprits is None:
        verdict = "no likely culprit: the ranks split evenly between the calls"
    else:
        verdict = "likely culprit: " + ", ".join(f"rank {_global(group, r)}" for r in culprits)
    prefix = flight_recorder.dump_prefix()
    paths = ", ".join(f"{prefix}{r}" for r in _ranks(group))
    return RuntimeError(
        f"neuron backend: mismatched collective {what} on rank {dist.get_rank()}: {problem}; "
        f"{verdict}. Flight recorder dumps (each rank writes its own): {paths}; this rank's: "
        f"{path}")


def reported(op_name: str, group: dist.ProcessGroup) -> dist.DistBackendError | None:
    """The error for a rank reaching a collective of a group another rank gave up on."""
    message = watchdog.incidents.get(group.group_name)
    if message is None:
        return None
    path, _ = _dump()
    return dist.DistBackendError(
        f"neuron backend: rank {dist.get_rank()} called c10d::{op_name} on group "
        f"'{group.group_name}' after another rank gave up on the group: {message}. This rank's "
        f"flight recorder dump: {path}")
