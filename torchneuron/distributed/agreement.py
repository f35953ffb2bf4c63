"""Checks that all ranks call the same collective on tensors of the same shapes and dtypes
before gloo moves any data. Without it gloo answers a size mismatch by aborting the receiving
process from its I/O thread (`op.preamble.length <= op.nbytes`), and the other ranks see only
"Connection reset by peer". With it every rank raises an error that names both sides.

The check costs one small all_gather (a fixed-size int64 fingerprint per rank) per collective.
Point-to-point ops are not checked: a pairwise check would cost a round trip each way."""

from __future__ import annotations

import torch
import torch.distributed as dist

# Which tensors of each op must look the same on every rank (argument positions; the op's
# schema is in torch/csrc/distributed/c10d/Ops.cpp). alltoall_base_ has its own rule.
AGREEING_ARGS = {
    "allreduce_": 0, "allreduce_coalesced_": 0, "broadcast_": 0, "reduce_": 0,
    "allgather_": 1, "_allgather_base_": 1, "allgather_coalesced_": 1,
    "allgather_into_tensor_coalesced_": 1, "reduce_scatter_": 0, "_reduce_scatter_base_": 0,
    "reduce_scatter_tensor_coalesced_": 0, "alltoall_": 1, "gather_": 1, "scatter_": 0,
}
CHECKED_OPS = tuple(AGREEING_ARGS) + ("alltoall_base_",)
_OP_CODES = {name: i + 1 for i, name in enumerate(CHECKED_OPS)}
_DTYPES = [getattr(torch, n) for n in (
    "float32", "float64", "float16", "bfloat16", "uint8", "int8", "int16", "int32", "int64",
    "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32",
    "uint64")]
_DTYPE_CODES = {d: i + 1 for i, d in enumerate(_DTYPES)}
_MAX_DIMS = 8
# op, tensor count, signature hash, then the first tensor: dtype, ndim, dims.
_HEAD = 5 + _MAX_DIMS


def _flatten(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _flatten(v)]


def _signature(tensors: list[torch.Tensor]) -> list[int]:
    sig = []
    for t in tensors:
        sig += [_DTYPE_CODES.get(t.dtype, 0), t.dim(), *t.shape]
    return sig


def _describe(dtype_code: int, dims: list[int]) -> str:
    name = str(_DTYPES[dtype_code - 1]).removeprefix("torch.") if dtype_code else "?"
    return f"{name}{list(dims)}"


def _fingerprint(op_name: str, args: tuple, world: int) -> torch.Tensor:
    fp = torch.full((_HEAD + 2 * world,), -1, dtype=torch.int64)
    if op_name == "alltoall_base_":
        out, inp, out_splits, in_splits = args[0], args[1], args[3], args[4]
        tensors = [inp]
        row = inp[0].numel() if inp.dim() and inp.shape[0] else 0
        # Elements this rank sends to / expects from each peer; the peers must mirror them.
        send = [s * row for s in in_splits] or [inp.numel() // world] * world
        recv = [s * row for s in out_splits] or [out.numel() // world] * world
        fp[_HEAD:] = torch.tensor(send + recv, dtype=torch.int64)
        # Rows may differ between ranks; what a row is may not.
        dtype, dims = inp.dtype, list(inp.shape[1:])
        sig = [_DTYPE_CODES.get(dtype, 0), *dims]
    else:
        tensors = _flatten(args[AGREEING_ARGS[op_name]])
        sig = _signature(tensors)
        dtype, dims = (tensors[0].dtype, list(tensors[0].shape)) if tensors else (None, [])
    fp[0] = _OP_CODES[op_name]
    fp[1] = len(tensors)
    fp[2] = hash(tuple(sig)) & ((1 << 62) - 1)  # ints hash the same in every process
    if dtype is not None:
        fp[3] = _DTYPE_CODES.get(dtype, 0)
        fp[4] = len(dims)
        fp[5:5 + min(len(dims), _MAX_DIMS)] = torch.tensor(dims[:_MAX_DIMS], dtype=torch.int64)
    return fp


def _explain(op_name: str, me: int, fps: torch.Tensor) -> str | None:
    names = {code: name for name, code in _OP_CODES.items()}
    mine = fps[me]
    for r in range(fps.shape[0]):
        other = fps[r]
        if other[0] != mine[0]:
            return (f"rank {me} called c10d::{op_name}, rank {r} called "
                    f"c10d::{names.get(int(other[0]), 'another collective')}")
        if not torch.equal(other[:_HEAD], mine[:_HEAD]):
            def side(fp):
                n, dims = int(fp[1]), fp[5:5 + int(fp[4])].tolist()
                more = f" (and {n - 1} more)" if n > 1 else ""
                return f"{n} tensor(s), first {_describe(int(fp[3]), dims)}{more}"
            return (f"rank {me} passes {side(mine)}, rank {r} passes {side(other)}; every rank "
                    "must pass tensors of the same shapes and dtypes")
    if op_name == "alltoall_base_":
        world = fps.shape[0]
        recv = mine[_HEAD + world:]
        for r in range(world):
            sends = int(fps[r][_HEAD + me])
            if sends != int(recv[r]):
                return (f"rank {r} sends {sends} elements to rank {me}, which expects "
                        f"{int(recv[r])} from it (input and output split sizes must mirror)")
    return None


def check(op_name: str, args: tuple, group: dist.ProcessGroup) -> None:
    """Raises on every rank when the ranks' calls of this collective disagree."""
    if op_name not in _OP_CODES:
        return
    world, me = group.size(), group.rank()
    if world == 1:
        return
    fp = _fingerprint(op_name, args, world)
    out = torch.empty(world * fp.numel(), dtype=torch.int64)
    group._get_backend(torch.device("cpu"))._allgather_base(out, fp).wait()
    problem = _explain(op_name, me, out.view(world, -1))
    if problem is not None:
        raise RuntimeError(f"neuron backend: mismatched collective c10d::{op_name} on rank "
                           f"{me} of group '{group.group_name}': {problem}")
