"""nki.collectives between the ranks of nki.multi_rank_simulate: each rank's call checks its
tensors, meets the other ranks of its rank list at the world's rendezvous (ranks.py), and writes
its share of the combined result.

Semantics, from the nki.collectives reference: a replica group is a list of rank lists, each rank
in at most one; the collective runs independently within each rank list, whose order is the order
of the gathered blocks (all_gather concatenates the ranks' srcs along collective_dim; reduce_scatter
gives the i-th rank of the list the i-th block of the reduction; all_to_all sends block j of each
rank's src to the j-th rank, which concatenates the blocks it receives in list order).
Reductions compute in float32 and cast to dst (the DMA engines' arithmetic); gathers, exchanges and
permutes copy bits, so src and dst must have one dtype. What the reference leaves open is refused:
a collective_dim other than all_gather's documented ones, dtype conversion in a copy, and a rank
that no collective_permute pair targets (what its dst would hold is not documented).
"""

from __future__ import annotations

import functools

import torch

from .context import current
from .errors import describe
from .ranks import Arrival
from .rules import fail
from .tensor import NkiTensor


def tensor_pairs(instr: str, srcs, dsts) -> list[tuple[NkiTensor, NkiTensor]]:
    srcs = list(srcs) if isinstance(srcs, (list, tuple)) else [srcs]
    dsts = list(dsts) if isinstance(dsts, (list, tuple)) else [dsts]
    if len(srcs) != len(dsts) or not srcs:
        fail("collective-shape", f"{instr}: {len(srcs)} srcs but {len(dsts)} dsts; each src "
             "needs its dst")
    kinds = set()
    for t in srcs + dsts:
        if not isinstance(t, NkiTensor) or t.buffer.kind == "psum":
            fail("collective-shape", f"{instr}: "
                 f"{describe(t) if isinstance(t, NkiTensor) else repr(t)} must be an HBM or "
                 "SBUF tensor")
        kinds.add(t.buffer.kind)
    if len(kinds) > 1:
        fail("collective-shape", f"{instr}: tensors mix HBM and SBUF; all must be in one")
    if kinds == {"sbuf"} and len(srcs) > 1:
        fail("collective-shape", f"{instr}: {len(srcs)} SBUF tensors; coalesced collectives "
             "(several tensors in one call) are supported on HBM only")
    return list(zip(srcs, dsts))


def group_lists(instr: str, world_size: int, group) -> list[list[int]]:
    lists = group.groups if hasattr(group, "groups") else group
    lists = [list(g) if isinstance(g, (list, tuple)) else [g] for g in lists]
    seen: set[int] = set()
    for rank_list in lists:
        for rank in rank_list:
            if not isinstance(rank, int) or not 0 <= rank < world_size:
                fail("collective-group", f"{instr}: replica group {lists} names rank {rank!r}; "
                     f"the world has ranks 0 to {world_size - 1}")
            if rank in seen:
                fail("collective-group", f"{instr}: replica group {lists} names rank {rank} "
                     "twice; each rank belongs to at most one rank list")
            seen.add(rank)
    return lists


def members_of(instr: str, seat, group) -> tuple[tuple[int, ...], list[list[int]]]:
    lists = group_lists(instr, seat.world.size, group)
    for rank_list in lists:
        if seat.rank in rank_list:
            return tuple(rank_list), lists
    fail("collective-group", f"{instr}: rank {seat.rank} is in no rank list of replica group "
         f"{lists}; a rank that makes a collective must belong to one")


def _label(instr: str, pairs, details: dict) -> str:
    tensors = ", ".join(f"src {tuple(s.shape)} {s.dtype} -> dst {tuple(d.shape)} {d.dtype}"
                        for s, d in pairs)
    extra = "".join(f", {k}={v}" for k, v in details.items())
    return f"{instr}({tensors}{extra})"


def _meet(instr: str, seat, pairs, members, details: dict, payload, combine):
    signature = (instr, tuple(sorted(details.items())),
                 tuple((tuple(s.shape), str(s.dtype), tuple(d.shape), str(d.dtype),
                        s.buffer.kind) for s, d in pairs))
    arrival = Arrival(signature, _label(instr, pairs, details), members, payload, combine)
    return seat.world.rendezvous(seat.rank, arrival)


def _require_dim(instr: str, pairs, dim) -> int:
    """all_gather's documented collective_dim: 0 for HBM tensors; 0 or 1 for SBUF tensors,
    which are 2-D (one free dimension)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        fail("collective-shape", f"{instr}: collective_dim={dim!r} must be an int")
    on_sbuf = pairs[0][0].buffer.kind == "sbuf"
    if on_sbuf:
        for s, d in pairs:
            for t in (s, d):
                if len(t.shape) != 2:
                    fail("collective-shape", f"{instr}: {describe(t)}: SBUF collectives operate "
                         "on 2-D tensors (one free dimension)")
    if dim not in ((0, 1) if on_sbuf else (0,)):
        fail("collective-shape", f"{instr}: collective_dim={dim}; supported are 0 for HBM "
             "tensors and 0 or 1 for SBUF tensors")
    return dim


def _require_same_dtype(instr: str, pairs) -> None:
    for s, d in pairs:
        if s.dtype is not d.dtype:
            fail("collective-shape", f"{instr}: src {describe(s)} and dst {describe(d)} differ "
                 "in dtype; this collective copies data unchanged")


def _scaled(shape, dim: int, factor) -> tuple:
    out = list(shape)
    out[dim] = factor(out[dim])
    return tuple(out)


# A multi-rank run always computes (its arguments are NumPy arrays, never torch.compile's fake
# tensors), so every rank contributes data.
def _bits(t: NkiTensor):
    return t.raw().clone()


def _values(t: NkiTensor):
    return t.read_f32().clone()


def _write_bits(pairs, results, run) -> None:
    for (_, dst), bits in zip(pairs, results):
        dst.write_raw(bits.reshape(-1), run)


def _write_values(pairs, results, run) -> None:
    for (_, dst), values in zip(pairs, results):
        dst.write(values.reshape(-1), run)


def _reduce(op, tensors):
    return functools.reduce(op.binary, tensors).to(torch.float32)


def all_reduce(instr, seat, pairs, group, op) -> None:
    run = current()
    members, lists = members_of(instr, seat, group)
    for s, d in pairs:
        if s.size != d.size:
            fail("collective-shape", f"{instr}: src {describe(s)} and dst {describe(d)} differ "
                 "in size; dst holds the element-wise reduction of the ranks' srcs")

    def combine(payloads):
        reduced = [_reduce(op, [p[i] for p in payloads]) for i in range(len(pairs))]
        return [reduced] * len(payloads)

    results = _meet(instr, seat, pairs, members, {"op": op.name, "replica_group": lists},
                    [_values(s) for s, _ in pairs], combine)
    _write_values(pairs, results, run)


def all_gather(instr, seat, pairs, group, dim) -> None:
    run = current()
    members, lists = members_of(instr, seat, group)
    dim = _require_dim(instr, pairs, dim)
    _require_same_dtype(instr, pairs)
    n = len(members)
    for s, d in pairs:
        if tuple(d.shape) != _scaled(s.shape, dim, lambda x: x * n):
            fail("collective-shape", f"{instr}: dst {describe(d)} must have src {describe(s)}'s "
                 f"shape with dimension {dim} times {n} (the ranks of the rank list)")

    def combine(payloads):
        return [[torch.cat([p[i] for p in payloads], dim) for i in range(len(pairs))]] * n

    results = _meet(instr, seat, pairs, members, {"collective_dim": dim, "replica_group": lists},
                    [_bits(s) for s, _ in pairs], combine)
    _write_bits(pairs, results, run)


def reduce_scatter(instr, seat, pairs, group, dim, op) -> None:
    run = current()
    members, lists = members_of(instr, seat, group)
    dim = _require_dim(instr, pairs, dim)
    n = len(members)
    for s, d in pairs:
        if s.shape[dim] % n or tuple(d.shape) != _scaled(s.shape, dim, lambda x: x // n):
            fail("collective-shape", f"{instr}: src {describe(s)} must split into {n} equal "
                 f"blocks along dimension {dim}, and dst {describe(d)} must have the shape of "
                 "one block")

    def combine(payloads):
        blocks = [_reduce(op, [p[i] for p in payloads]).chunk(n, dim)
                  for i in range(len(pairs))]
        return [[b[rank] for b in blocks] for rank in range(n)]

    results = _meet(instr, seat, pairs, members, {"op": op.name, "collective_dim": dim,
                                                  "replica_group": lists},
                    [_values(s) for s, _ in pairs], combine)
    _write_values(pairs, results, run)


def all_to_all(instr, seat, pairs, group, dim) -> None:
    run = current()
    members, lists = members_of(instr, seat, group)
    dim = _require_dim(instr, pairs, dim)
    _require_same_dtype(instr, pairs)
    n = len(members)
    for s, d in pairs:
        if s.shape[dim] % n or tuple(d.shape) != tuple(s.shape):
            fail("collective-shape", f"{instr}: src {describe(s)} must split into {n} equal "
                 f"blocks along dimension {dim}, and dst {describe(d)} must have its shape")

    def combine(payloads):
        blocks = [[p[i].chunk(n, dim) for p in payloads] for i in range(len(pairs))]
        return [[torch.cat([sent[rank] for sent in per_src], dim) for per_src in blocks]
                for rank in range(n)]

    results = _meet(instr, seat, pairs, members, {"collective_dim": dim, "replica_group": lists},
                    [_bits(s) for s, _ in pairs], combine)
    _write_bits(pairs, results, run)


def collective_permute(instr, seat, pairs, source_target_pairs) -> None:
    run = current()
    size = seat.world.size
    _require_same_dtype(instr, pairs)
    for s, d in pairs:
        if s.size != d.size:
            fail("collective-shape", f"{instr}: src {describe(s)} and dst {describe(d)} differ "
                 "in size; dst receives one rank's src")
    routes = [tuple(int(r) for r in p) for p in source_target_pairs]
    source_of: dict[int, int] = {}
    for route in routes:
        if len(route) != 2 or not all(0 <= r < size for r in route):
            fail("collective-group", f"{instr}: pair {route} must be (source, target) ranks of "
                 f"the world 0 to {size - 1}")
        source, target = route
        if target in source_of:
            fail("collective-group", f"{instr}: rank {target} is the target of two pairs")
        source_of[target] = source
    if len({s for s, _ in routes}) != len(routes):
        fail("collective-group", f"{instr}: pairs {routes} name a source twice")
    if len(source_of) != size:
        missing = min(set(range(size)) - set(source_of))
        fail("collective-group", f"{instr}: pairs {routes} leave rank {missing} the target of "
             "no pair; what its dsts hold then is not documented")
    ranks = tuple(range(size))

    def combine(payloads):
        return [payloads[source_of[rank]] for rank in ranks]

    results = _meet(instr, seat, pairs, ranks, {"source_target_pairs": routes},
                    [_bits(s) for s, _ in pairs], combine)
    _write_bits(pairs, results, run)
