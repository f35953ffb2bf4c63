"""What may fuse, in one place: pointwise ops are those PyTorch tags `pointwise` (on the
OpOverload itself, so every op PyTorch adds is covered without a list here), and a few reductions
may end a chain. Everything else breaks a chain."""

from __future__ import annotations

import torch

aten = torch.ops.aten

# Reductions over dims that Inductor lowers into the same loop nest as the pointwise ops feeding
# them; only one, at the end of a chain (a later op would read a reduced shape).
REDUCTIONS = frozenset({
    aten.sum.default, aten.sum.dim_IntList,
    aten.mean.default, aten.mean.dim,
    aten.amax.default, aten.amin.default,
    aten.prod.default, aten.prod.dim_int,
})


class UnfusibleOpError(ValueError):
    """A chain names an op the fuser cannot fuse."""


def _unfit_for_a_step(op: torch._ops.OpOverload) -> bool:
    # In-place and out= overloads write their arguments (a chain says where results go through
    # its outputs instead); seeded ops draw random numbers the generated code would not draw;
    # a step has one result (frexp, tagged pointwise, returns two).
    # internal: see runtime/torch_internals.py "torch._ops.OpOverload._schema"
    schema = op._schema
    return (schema.is_mutable or len(schema.returns) != 1
            or torch.Tag.nondeterministic_seeded in op.tags)


def _classify(op: torch._ops.OpOverload) -> str | None:
    if op in REDUCTIONS:
        return "reduction"
    if torch.Tag.pointwise in op.tags and not _unfit_for_a_step(op):
        return "pointwise"
    return None


# Per op, keyed by id (OpOverload hashes in Python, slowly): chains are described at every queue
# hand-over. The op is kept in the value, so its id stays its own.
_kinds: dict[int, tuple[object, str | None]] = {}


def _kind_of(op: object) -> str | None:
    known = _kinds.get(id(op))
    if known is None or known[0] is not op:
        known = (op, _classify(op) if isinstance(op, torch._ops.OpOverload) else None)
        if isinstance(op, torch._ops.OpOverload):
            _kinds[id(op)] = known
    return known[1]


def is_pointwise(op: object) -> bool:
    """True for a functional OpOverload tagged torch.Tag.pointwise."""
    return _kind_of(op) == "pointwise"


def is_reduction(op: object) -> bool:
    """True for the reductions that may end a chain (sum/mean/amax/amin/prod over dims)."""
    return _kind_of(op) == "reduction"


def is_fusible(op: object) -> bool:
    return _kind_of(op) is not None


def fusion_enabled() -> bool:
    """Fusion is off while deterministic algorithms are requested: a generated kernel's
    reduction order and vectorization are not ATen's."""
    return not torch.are_deterministic_algorithms_enabled()


def check_fusible(op: object, position: int) -> None:
    """Raises UnfusibleOpError naming `op` when it cannot be step `position` of a chain."""
    if not is_fusible(op):
        raise UnfusibleOpError(
            f"step {position}: {op} cannot be fused: a chain holds functional pointwise ops "
            f"(torch.Tag.pointwise) and may end with one reduction "
            f"({', '.join(sorted(str(r) for r in REDUCTIONS))})")
