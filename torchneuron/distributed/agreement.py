"""Checks that all ranks call the same collective on tensors of the same shapes and dtypes
before gloo moves any data. Without it gloo answers a size mismatch by aborting the receiving
process from its I/O thread (`op.preamble.length <= op.nbytes`), and the other ranks see only
"Connection reset by peer". With it every rank raises an error that names both sides.

The check exchanges a fixed-size int64 fingerprint between all ranks per collective, over direct
sockets (agreement_channel.py: one network round trip), or as a small gloo all_gather where
those cannot be set up.
Point-to-point ops are not checked: a pairwise check would cost a round trip each way.
NEURON_DIST_CHECK=0 (runtime/config.py) turns the check off, for latency-bound programs."""

from __future__ import annotations

from array import array

import torch
import torch.distributed as dist

from . import agreement_channel, flight_recorder, forensics
# internal: see runtime/torch_internals.py "torch.ops.c10d.<op>.default._schema"
from .checked_collectives import AGREEING_ARGS, CHECKED_OPS, flatten_tensors, is_enabled

# dist.barrier is checked too (barriers.py), before it reaches gloo on CPU tensors.
_OP_CODES = {name: i + 1 for i, name in enumerate(CHECKED_OPS + ("barrier",))}
_DTYPES = [getattr(torch, n) for n in (
    "float32", "float64", "float16", "bfloat16", "uint8", "int8", "int16", "int32", "int64",
    "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32",
    "uint64")]
_DTYPE_CODES = {d: i + 1 for i, d in enumerate(_DTYPES)}
_MAX_DIMS = 8
# op, tensor count, signature hash, whether the call is valid on its own, then the first
# tensor: dtype, ndim, dims; then (alltoall_base_ only) elements sent to / expected from each rank.
_OP, _COUNT, _HASH, _VALID, _DTYPE, _NDIM, _DIMS = range(7)
_HEAD = _DIMS + _MAX_DIMS


def _signature(tensors: list[torch.Tensor]) -> list[int]:
    sig = []
    for t in tensors:
        sig += [_DTYPE_CODES.get(t.dtype, 0), t.dim(), *t.shape]
    return sig


def _describe(dtype_code: int, dims: list[int]) -> str:
    name = str(_DTYPES[dtype_code - 1]).removeprefix("torch.") if dtype_code else "?"
    return f"{name}{list(dims)}"


def _fingerprint(op_name: str, args: tuple, world: int) -> list[int]:
    # A Python list, not a tensor: a dozen element writes into a tensor cost ~50 us per call.
    fp = [-1] * (_HEAD + 2 * world)
    valid = True
    if op_name == "alltoall_base_":
        out, inp, out_splits, in_splits = args[0], args[1], args[3], args[4]
        tensors = [inp]
        rows_in, rows_out = (inp.shape[0] if inp.dim() else 1), (out.shape[0] if out.dim() else 1)
        row = inp.numel() // rows_in if rows_in else 0
        in_splits = list(in_splits) or [rows_in // world] * world
        out_splits = list(out_splits) or [rows_out // world] * world
        valid = (sum(in_splits) == rows_in and sum(out_splits) == rows_out
                 and len(in_splits) == len(out_splits) == world)
        if valid:
            fp[_HEAD:] = [s * row for s in in_splits + out_splits]
        # Rows may differ between ranks; what a row is may not.
        dtype, dims = inp.dtype, list(inp.shape[1:])
        sig = [_DTYPE_CODES.get(dtype, 0), *dims]
    else:
        tensors = flatten_tensors(args[AGREEING_ARGS[op_name]]) if op_name in AGREEING_ARGS else []
        sig = _signature(tensors)
        dtype, dims = (tensors[0].dtype, list(tensors[0].shape)) if tensors else (None, [])
    fp[_OP] = _OP_CODES[op_name]
    fp[_COUNT] = len(tensors)
    fp[_HASH] = hash(tuple(sig)) & ((1 << 62) - 1)  # ints hash the same in every process
    fp[_VALID] = int(valid)
    if dtype is not None:
        fp[_DTYPE] = _DTYPE_CODES.get(dtype, 0)
        fp[_NDIM] = len(dims)
        shown = dims[:_MAX_DIMS]
        fp[_DIMS:_DIMS + len(shown)] = shown
    return fp


def _side(fp: torch.Tensor) -> str:
    n, dims = int(fp[_COUNT]), fp[_DIMS:_DIMS + int(fp[_NDIM])].tolist()
    more = f" (and {n - 1} more)" if n > 1 else ""
    return f"{n} tensor(s), first {_describe(int(fp[_DTYPE]), dims)}{more}"


def _explain(op_name: str, me: int, fps: torch.Tensor) -> str | None:
    """The first disagreement, looking at every rank's fingerprint, so that every rank finds
    one when there is one (a rank that went on alone would leave gloo waiting)."""
    names = {code: name for name, code in _OP_CODES.items()}
    world = fps.shape[0]
    for r in range(world):
        if fps[r][_OP] != fps[me][_OP]:
            return (f"rank {me} called c10d::{op_name}, rank {r} called "
                    f"c10d::{names.get(int(fps[r][_OP]), 'another collective')}")
    for r in range(world):
        if not fps[r][_VALID]:
            return (f"rank {r}'s split sizes do not match its tensors (they must add up to "
                    "the first dimension, one per rank)")
    for r in range(world):
        if not torch.equal(fps[r][:_HEAD], fps[me][:_HEAD]):
            return (f"rank {me} passes {_side(fps[me])}, rank {r} passes {_side(fps[r])}; "
                    "every rank must pass tensors of the same shapes and dtypes")
    if op_name == "alltoall_base_":
        for src in range(world):
            for dst in range(world):
                sends = int(fps[src][_HEAD + dst])
                expects = int(fps[dst][_HEAD + world + src])
                if sends != expects:
                    return (f"rank {src} sends {sends} elements to rank {dst}, which expects "
                            f"{expects} from it (input and output split sizes must mirror)")
    return None


def will_check(op_name: str, group: dist.ProcessGroup) -> bool:
    return op_name in CHECKED_OPS and is_enabled() and group.size() > 1


def check(op_name: str, args: tuple, group: dist.ProcessGroup) -> None:
    """Raises on every rank when the ranks' calls of this collective disagree, or when some
    never make it (naming the likely culprit, forensics.py)."""
    if not will_check(op_name, group):
        return
    exchange(op_name, args, group)


def exchange(op_name: str, args: tuple, group: dist.ProcessGroup) -> None:
    """The check itself, for a group of more than one rank (barriers.py calls it for
    dist.barrier, which never reaches the backend's kernels)."""
    name = group.group_name
    if forensics.watchdog.incidents and name in forensics.watchdog.incidents:
        raise forensics.reported(op_name, group)
    recording = flight_recorder.enabled()
    if recording:
        flight_recorder.waiting(op_name, args, name)
    world, me = group.size(), group.rank()
    fp = array("q", _fingerprint(op_name, args, world))
    n = len(fp)
    gathered = array("q")
    try:
        gathered.frombytes(agreement_channel.channel_for(group).exchange(
            fp.tobytes(), f"c10d::{op_name} on rank {me}"))
    except agreement_channel.ChannelError as e:
        raise forensics.peers_failed(op_name, group, str(e), e.missing, e.gone) from None
    if op_name != "alltoall_base_" and all(gathered[r * n:(r + 1) * n] == fp
                                           for r in range(world)):
        if recording:
            flight_recorder.done_waiting(name)
        return  # every rank made the same call
    fps = torch.tensor(gathered.tolist(), dtype=torch.int64).view(world, n)
    problem = _explain(op_name, me, fps)
    if problem is not None:
        culprits = forensics.minority([tuple(row[:_HEAD].tolist()) for row in fps])
        raise forensics.mismatched(op_name, group, problem, culprits)
    if recording:
        flight_recorder.done_waiting(name)
