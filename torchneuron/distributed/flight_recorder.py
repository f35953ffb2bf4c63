"""PyTorch's flight recorder (c10d's FlightRecorder ring buffer, which gloo fills, hence every
collective of the neuron backend), completed with what only the backend knows, and dumped where
PyTorch dumps it. There is no second buffer: every dump starts from
`torch._C._distributed_c10d._dump_fr_trace()` and completes it:

- the process-group table (`pg_config`): gloo records a group's name and ranks when it is
  constructed, before c10d names the group, so the raw table holds one group named '' with no
  ranks and `fr_trace` fails with KeyError ''. The table is rebuilt from c10d's own world (name,
  description and global ranks of every group of this process).
- states: gloo records no events, so every raw entry says 'scheduled'. An entry gloo has retired
  ran to its end: 'completed', unless the backend saw its group fail from it on ('started': it
  began and never completed). An entry still in gloo passed the agreement check (agreement.py),
  so every rank had reached it: 'started'. Point-to-point ops are never checked and stay as gloo
  left them.
- the collective a rank is waiting in: the agreement check runs before gloo sees the collective,
  so while a rank waits there for the others (the usual place of a hang) gloo has recorded
  nothing. The backend adds that one entry per group ('scheduled', with the waiting thread's
  stack), so `fr_trace` sees which collective each rank had reached.

`torch._C._distributed_c10d._dump_fr_trace` (PyTorch's entry point for a dump on demand) returns
the completed dump once torchneuron is imported; `dump()` writes it to
`${TORCH_FR_DUMP_TEMP_FILE}<global rank>`, which `python -m
torch.distributed.flight_recorder.fr_trace <folder>` reads."""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time
from typing import Any

import torch
import torch.distributed as dist

from ..runtime import config
from .checked_collectives import AGREEING_ARGS, flatten_tensors, is_enabled

# gloo's profiling title (its AsyncWork's) for each c10d op the backend checks, which is what the
# pending entry must say for fr_trace to compare it with other ranks' entries.
_GLOO_TITLES = {
    "allreduce_": "all_reduce", "allreduce_coalesced_": "allreduce_coalesced",
    "broadcast_": "broadcast", "reduce_": "reduce", "allgather_": "all_gather",
    "_allgather_base_": "all_gather", "allgather_coalesced_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather", "reduce_scatter_": "reduce_scatter",
    "_reduce_scatter_base_": "reduce_scatter", "reduce_scatter_tensor_coalesced_":
    "reduce_scatter", "alltoall_": "all_to_all", "alltoall_base_": "all_to_all",
    "gather_": "gather", "scatter_": "scatter", "barrier": "barrier",
}
_P2P = ("gloo:send", "gloo:recv")


class _Pending:
    """The collective a thread is waiting in, for its group, before gloo has it."""

    __slots__ = ("op_name", "args", "time_ns", "thread")

    def __init__(self, op_name: str, args: tuple) -> None:
        self.op_name, self.args = op_name, args
        self.time_ns = time.time_ns()
        self.thread = threading.get_ident()


# group name -> the collective waiting in the agreement check. One per group: a group's checked
# collectives start one at a time (the caller's thread or the group's sequencing thread).
pending: dict[str, _Pending] = {}
# group name -> the collective this rank gave up waiting in (the group is broken after it).
abandoned: dict[str, _Pending] = {}
# group name -> gloo's sequence number of the first collective the backend saw fail in it; later
# entries of the group cannot have completed either (the group is broken).
failed_from: dict[str, int] = {}
_enabled: bool | None = None


def enabled() -> bool:
    """Whether PyTorch's recorder keeps entries (TORCH_FR_BUFFER_SIZE > 0)."""
    global _enabled
    if _enabled is None:
        _enabled = config.current().fr_buffer_size > 0
    return _enabled


def waiting(op_name: str, args: tuple, group_name: str) -> None:
    pending[group_name] = _Pending(op_name, args)


def done_waiting(group_name: str) -> None:
    pending.pop(group_name, None)


def gave_up_waiting(group_name: str) -> None:
    """The collective this group waited in failed (a timeout, a rank gone): it stays in every
    later dump, as the collective this rank had reached."""
    waiting_op = pending.pop(group_name, None)
    if waiting_op is not None:
        abandoned.setdefault(group_name, waiting_op)


def group_failed(group: dist.ProcessGroup) -> None:
    """The backend saw a collective of this group fail (its sequence number is gloo's latest)."""
    try:
        # internal: see runtime/torch_internals.py "ProcessGroup private backend table"
        # internal: see runtime/torch_internals.py "_get_sequence_number_for_group"
        seq = group._get_backend(torch.device("cpu"))._get_sequence_number_for_group()
    except RuntimeError:
        return
    failed_from.setdefault(group.group_name, seq)


def dump_prefix() -> str:
    return config.current().fr_dump_prefix


def dump_path(prefix: str | None = None) -> str:
    """Where this process's dump goes: PyTorch's file name for it, the prefix and the global
    rank."""
    prefix = dump_prefix() if prefix is None else prefix
    rank = dist.get_rank() if dist.is_initialized() else 0
    return f"{prefix}{rank}"


# ---------------------------------------------------------------------------- completing a dump

def _group_table() -> dict[str, dict[str, str]]:
    """c10d's groups of this process: name -> {name, desc, global ranks}, as gloo would have
    recorded them had they been named when it was made."""
    # internal: see runtime/torch_internals.py "torch.distributed.distributed_c10d._world"
    world = dist.distributed_c10d._world
    table = {}
    for pg, name in list(world.pg_names.items()):
        ranks = sorted(world.pg_group_ranks.get(pg, {}))
        table[name] = {"name": name, "desc": getattr(pg, "group_desc", ""), "ranks": str(ranks)}
    return table


def _neuron_groups() -> dict[str, dist.ProcessGroup]:
    # internal: see runtime/torch_internals.py "torch.distributed.distributed_c10d._world"
    world = dist.distributed_c10d._world
    return {name: pg for pg, name in list(world.pg_names.items())
            if world.pg_map.get(pg, (None,))[0] == "neuron"}


def _sizes(value) -> tuple[list, list]:
    tensors = [t for t in flatten_tensors(value) if isinstance(t, torch.Tensor)] if value is not None \
        else []
    return [list(t.shape) for t in tensors], [_dtype_name(t.dtype) for t in tensors]


def _dtype_name(dtype: torch.dtype) -> str:
    # c10::ScalarType names, as the recorder writes them (Float, BFloat16, Long, ...)
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
            torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int",
            torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
            torch.bool: "Bool"}.get(dtype, str(dtype).removeprefix("torch."))


_HERE = os.path.dirname(os.path.abspath(__file__))


def _frames(thread: int) -> list[dict[str, Any]]:
    """The thread's Python stack, innermost first as the recorder writes it, from the program's
    call on (the backend's own frames, the check and the dump, say nothing about the hang)."""
    frame = sys._current_frames().get(thread)
    frames = []
    while frame is not None:
        frames.append({"name": frame.f_code.co_name, "filename": frame.f_code.co_filename,
                       "line": frame.f_lineno})
        frame = frame.f_back
    while frames and frames[0]["filename"].startswith(_HERE):
        frames.pop(0)
    return frames


def _pending_entry(name: str, waiting_op: _Pending, entries: list[dict], record_id: int,
                   timeout_ms: int) -> dict[str, Any]:
    mine = [e for e in entries if e["process_group"][0] == name]
    last = mine[-1] if mine else None
    group = _neuron_groups().get(name)
    if last is not None:
        seq, op_id, pg_id = last["collective_seq_id"] + 1, last["op_id"] + 1, last["pg_id"]
    else:
        # The ring buffer lost (or never had) this group's entries: gloo's own counter.
        # internal: see runtime/torch_internals.py "ProcessGroup private backend table"
        # internal: see runtime/torch_internals.py "_get_sequence_number_for_group"
        count = (group._get_backend(torch.device("cpu"))._get_sequence_number_for_group()
                 if group is not None else 0)
        seq, op_id, pg_id = count + 1, count + 1, -1
    args = waiting_op.args
    position = AGREEING_ARGS.get(waiting_op.op_name)
    if waiting_op.op_name == "alltoall_base_":
        ins, in_types = _sizes(args[1])
        outs, out_types = _sizes(args[0])
    elif position is None:  # barrier: no data
        ins, in_types, outs, out_types = [], [], [], []
    else:
        ins, in_types = _sizes(args[position])
        outs, out_types = _sizes(args[0])
    return {
        "record_id": record_id, "pg_id": pg_id,
        "process_group": (name, group.group_desc if group is not None else ""),
        "thread_name": threading.current_thread().name if waiting_op.thread ==
        threading.get_ident() else "waiting in the agreement check",
        "thread_id": str(waiting_op.thread),
        "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": op_id,
        "profiling_name": f"gloo:{_GLOO_TITLES.get(waiting_op.op_name, waiting_op.op_name)}",
        "time_created_ns": waiting_op.time_ns,
        "input_sizes": ins, "input_dtypes": in_types, "output_sizes": outs,
        "output_dtypes": out_types, "state": "scheduled",
        "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
        "retired": False, "timeout_ms": timeout_ms, "is_p2p": False,
        "frames": [],
    }


def waiting_now() -> list[tuple[str, _Pending, list[dict[str, Any]]]]:
    """The collectives threads wait in (or gave up on), with their stacks, taken before the
    raw dump: symbolizing it can take seconds, in which a waiting collective may complete."""
    return [(name, op, _frames(op.thread)) for name, op in [*abandoned.items(),
                                                           *pending.items()]]


# internal: see runtime/torch_internals.py "c10d FlightRecorder dump format"
def complete(raw: dict[str, Any], waiting: list | None = None) -> dict[str, Any]:
    """The raw dump, with the group table, the states and the collectives threads wait in."""
    raw["pg_config"] = _group_table()
    entries = raw.get("entries")
    if entries is None:
        return raw
    neuron = _neuron_groups()
    checked = is_enabled()
    for e in entries:
        name = e["process_group"][0]
        if e["profiling_name"] in _P2P or e["state"] != "scheduled":
            continue
        if e["retired"]:
            broken_from = failed_from.get(name)
            e["state"] = ("started" if broken_from is not None and e["op_id"] >= broken_from
                          else "completed")
        elif name in neuron and checked:
            e["state"] = "started"
    next_id = max((e["record_id"] for e in entries), default=-1) + 1
    from .agreement_channel import _group_settings

    for name, waiting_op, frames in (waiting_now() if waiting is None else waiting):
        timeout_ms = int(_group_settings.get(name, ("", 0.0))[1] * 1000)
        entry = _pending_entry(name, waiting_op, entries, next_id, timeout_ms)
        entry["frames"] = frames
        entries.append(entry)
        next_id += 1
    return raw


def position(raw: dict[str, Any], group_name: str) -> dict[str, Any] | None:
    """The entry of a completed dump that says where this rank is in the group: the collective
    it waits in or gave up on, else its latest one."""
    mine = [e for e in raw.get("entries", []) if e["process_group"][0] == group_name]
    return mine[-1] if mine else None


# internal: see runtime/torch_internals.py "torch._C._distributed_c10d._dump_fr_trace"
_raw_dump = torch._C._distributed_c10d._dump_fr_trace


def dump_fr_trace(includeCollectives: bool | None = None, includeStackTraces: bool | None = None,
                  onlyActive: bool | None = None) -> bytes:
    """PyTorch's `_dump_fr_trace`, completed (module docstring)."""
    waiting = waiting_now()
    raw = pickle.loads(_raw_dump(includeCollectives, includeStackTraces, onlyActive))
    return pickle.dumps(complete(raw, waiting))


dump_fr_trace.__doc__ = (_raw_dump.__doc__ or "") + "\n" + (dump_fr_trace.__doc__ or "")


def install() -> None:
    """Makes PyTorch's on-demand entry point return the completed dump (once per process)."""
    torch._C._distributed_c10d._dump_fr_trace = dump_fr_trace


_dump_lock = threading.Lock()


def dump(prefix: str | None = None, stack_traces: bool = False) -> tuple[str, dict[str, Any]]:
    """Writes this process's completed dump to `<prefix><global rank>`; returns the path and
    the dump. Safe from any thread; the file appears whole (written aside, then renamed).

    Without `stack_traces` the recorder's entries carry no frames (the collective a thread
    waits in always carries its thread's): PyTorch symbolizes them at a process's first dump,
    which takes seconds (3.8 s measured; 1.3 s of CPU), too long for a dump on the way to an
    error."""
    path = dump_path(prefix)
    waiting = waiting_now()
    completed = complete(pickle.loads(_raw_dump(True, stack_traces, False)), waiting)
    data = pickle.dumps(completed)
    with _dump_lock:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial"
        with open(partial, "wb") as f:
            f.write(data)
        os.replace(partial, path)
    return path, completed
