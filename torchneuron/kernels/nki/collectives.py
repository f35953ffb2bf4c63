"""nki.collectives. A kernel called as usual runs as rank 0 of a world of one, so a collective
over the replica group [[0]] is what it is for one rank (each dst receives its src: a reduction,
gather, scatter or exchange of one contribution). A group that names another rank is refused
(rule `collective-group`): there is no other chip to talk to; the ring-implicit permutes, whose
partners the runtime chooses, are refused as unsupported. Multi-chip training uses
torch.distributed's `neuron` backend instead.

Under nki.multi_rank_simulate a kernel runs as one rank of a world of several (run.rank_seat, set
by Kernel.run), and the collectives exchange data between the ranks (collectives_ranks.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from . import collectives_ranks as ranks
from .context import current
from .errors import NkiUnsupportedError, describe
from .isa_memory import _move
from .objects import NKIObject
from .ops import as_op
from .rules import fail
from .tensor import NkiTensor

WORLD = [[0]]  # the replica groups of a world of one rank


@dataclass
class ReplicaGroup(NKIObject):
    """The ranks a collective runs on, as a list of rank lists."""
    groups: list = field(default_factory=lambda: [[0]])

    def __post_init__(self):
        groups = self.groups
        if groups and not isinstance(groups[0], (list, tuple)):
            groups = [groups]  # ReplicaGroup([0]) names one rank list
        self.groups = [[int(r) for r in g] for g in groups]

    @staticmethod
    def from_partition_op(world_size: int, op: "rg_partition_op", operand: int) -> "ReplicaGroup":
        """The rank lists of ranks [0, world_size) that share rank_list_id = op(rank, operand),
        in the order of their first rank (the reference's examples: div 4 of 8 ranks gives
        [[0, 1, 2, 3], [4, 5, 6, 7]], mod 4 gives [[0, 4], [1, 5], [2, 6], [3, 7]])."""
        if not isinstance(op, rg_partition_op):
            raise TypeError(f"ReplicaGroup.from_partition_op: op={op!r} must be an "
                            "nki.collectives.rg_partition_op")
        lists: dict[int, list[int]] = {}
        for rank in range(int(world_size)):
            lists.setdefault(op.apply(rank, int(operand)), []).append(rank)
        return ReplicaGroup(list(lists.values()))


class rg_partition_op(enum.Enum):
    """How ReplicaGroup.from_partition_op maps a rank to the id of its rank list."""
    bitwise_and = "bitwise_and"
    div = "div"
    mod = "mod"

    def apply(self, rank: int, operand: int) -> int:
        if self is rg_partition_op.bitwise_and:
            return rank & operand
        if operand == 0:
            raise ValueError(f"rg_partition_op.{self.name} needs a non-zero operand")
        return rank // operand if self is rg_partition_op.div else rank % operand


def _seat():
    """The rank the running kernel is in nki.multi_rank_simulate's world; None outside one."""
    return getattr(current(), "rank_seat", None)


def rank_id(name=None) -> int:
    seat = _seat()
    return 0 if seat is None else seat.rank


def _single_rank(instr: str, group) -> None:
    groups = group.groups if isinstance(group, ReplicaGroup) else ReplicaGroup(group).groups
    if groups != WORLD:
        fail("collective-group", f"{instr}: replica group {groups} names ranks the software "
             "NeuronCore does not have; a kernel here runs as rank 0 of one ([[0]]). Run "
             "multi-rank work through torch.distributed's `neuron` backend")


def _copies(instr: str, srcs, dsts) -> list[tuple[NkiTensor, NkiTensor]]:
    srcs = list(srcs) if isinstance(srcs, (list, tuple)) else [srcs]
    dsts = list(dsts) if isinstance(dsts, (list, tuple)) else [dsts]
    if len(srcs) != len(dsts):
        fail("collective-shape", f"{instr}: {len(srcs)} srcs but {len(dsts)} dsts")
    pairs = list(zip(srcs, dsts))
    kinds = set()
    for src, dst in pairs:
        for role, t in (("src", src), ("dst", dst)):
            if not isinstance(t, NkiTensor) or t.buffer.kind == "psum":
                fail("collective-shape", f"{instr}: {role} "
                     f"{describe(t) if isinstance(t, NkiTensor) else repr(t)} must be an HBM or "
                     "SBUF tensor")
            kinds.add(t.buffer.kind)
        if src.size != dst.size:
            fail("collective-shape", f"{instr}: src {describe(src)} and dst {describe(dst)} "
                 "differ in size; with one rank a collective's dst holds exactly its src")
    if len(kinds) > 1:
        fail("collective-shape", f"{instr}: tensors mix HBM and SBUF; all must be in one")
    return pairs


def _run(instr: str, srcs, dsts, group) -> None:
    run = current()
    _single_rank(instr, group)
    for src, dst in _copies(instr, srcs, dsts):
        if run.computes:
            _move(dst, src, run)


def self_index_in_replica_group(replica_group, name=None) -> int:
    """The caller's position in its own rank list of replica_group (an error where it is in
    none)."""
    I = "nki.collectives.self_index_in_replica_group"
    seat = _seat()
    if seat is None:
        _single_rank(I, replica_group)
        return 0
    members, _ = ranks.members_of(I, seat, replica_group)
    return members.index(seat.rank)


def _reduce_op(instr: str, op):
    op = as_op(op, instr)
    if op.name not in ("add", "minimum", "maximum"):
        fail("operator", f"{instr}: op={op!r} must be nl.add, nl.minimum or nl.maximum")
    return op


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None):
    I = "nki.collectives.all_reduce"
    op = _reduce_op(I, op)
    seat = _seat()
    if seat is not None:
        return ranks.all_reduce(I, seat, ranks.tensor_pairs(I, srcs, dsts), replica_group, op)
    _run(I, srcs, dsts, replica_group)


def all_gather(srcs, dsts, replica_group, collective_dim=0, priority=None, name=None):
    I = "nki.collectives.all_gather"
    seat = _seat()
    if seat is not None:
        return ranks.all_gather(I, seat, ranks.tensor_pairs(I, srcs, dsts), replica_group,
                                collective_dim)
    _run(I, srcs, dsts, replica_group)


def reduce_scatter(srcs, dsts, replica_group, collective_dim=0, op=None, priority=None,
                   name=None):
    I = "nki.collectives.reduce_scatter"
    seat = _seat()
    if seat is not None:  # a reduction over several ranks needs its operator
        return ranks.reduce_scatter(I, seat, ranks.tensor_pairs(I, srcs, dsts), replica_group,
                                    collective_dim, _reduce_op(I, op))
    _run(I, srcs, dsts, replica_group)


def all_to_all(srcs, dsts, replica_group, collective_dim=0, priority=None, name=None):
    I = "nki.collectives.all_to_all"
    seat = _seat()
    if seat is not None:
        return ranks.all_to_all(I, seat, ranks.tensor_pairs(I, srcs, dsts), replica_group,
                                collective_dim)
    _run(I, srcs, dsts, replica_group)


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None):
    I = "nki.collectives.collective_permute"
    seat = _seat()
    if seat is not None:
        return ranks.collective_permute(I, seat, ranks.tensor_pairs(I, srcs, dsts),
                                        source_target_pairs)
    pairs = [tuple(int(r) for r in p) for p in source_target_pairs]
    if pairs != [(0, 0)]:
        fail("collective-group", f"nki.collectives.collective_permute: pairs {pairs} name ranks "
             "the software NeuronCore does not have; a kernel here is rank 0 of one ([(0, 0)])")
    _run("nki.collectives.collective_permute", srcs, dsts, WORLD)


def _unsupported(name: str, why: str):
    def collective(*args, **kwargs):
        raise NkiUnsupportedError(f"nki.collectives.{name} is not supported by the software "
                                  f"NeuronCore: {why}; docs/nki.md lists what runs")
    collective.__name__ = name
    return collective


_RING = "its ring partners are chosen by the Neuron runtime of a multi-chip job"
all_to_all_v = _unsupported("all_to_all_v", "its counts come from a multi-chip runtime")
all_gather_v = _unsupported("all_gather_v", "it is documented for replica groups of exactly 4 "
                            "ranks under LNC=2 only, which a world of one cannot form")
collective_permute_implicit = _unsupported("collective_permute_implicit", _RING)
collective_permute_implicit_reduce = _unsupported("collective_permute_implicit_reduce", _RING)
collective_permute_implicit_current_processing_rank_id = _unsupported(
    "collective_permute_implicit_current_processing_rank_id", _RING)
