"""What may fuse, asked of fused eager's one rule (csrc/fused_eager/FusibleOps.h), which the
execution queue applies to every op it may hold: ops PyTorch tags `pointwise` (on the
OpOverload itself, so every op PyTorch adds is covered without a list here), functional, with one
tensor result and no random draws, and the reductions of torchneuron/ops/op_lists.py that may end
a chain. Everything else breaks a chain. This module gives the rule its lists when the package is
imported, before any op is held."""

from __future__ import annotations

import torch

from .._C import fused_eager as _fused_eager_c
from ..ops.op_lists import CHAIN_ENDING_REDUCTIONS
from . import runtime_scalars

_fused_eager_c.configure_rule(list(CHAIN_ENDING_REDUCTIONS),
                              runtime_scalars.configured_names())


class UnfusibleOpError(ValueError):
    """A chain names an op the fuser cannot fuse."""


# Per op, keyed by id (OpOverload hashes in Python, slowly): chains are described at every queue
# hand-over. The op is kept in the value, so its id stays its own.
_kinds: dict[int, tuple[object, str]] = {}


def _kind_of(op: object) -> str:
    known = _kinds.get(id(op))
    if known is None or known[0] is not op:
        # internal: see runtime/torch_internals.py "torch._ops.OpOverload._schema"
        if not isinstance(op, torch._ops.OpOverload):
            return ""
        known = (op, _fused_eager_c.step_kind(op.name()))
        _kinds[id(op)] = known
    return known[1]


def is_pointwise(op: object) -> bool:
    """True for a functional OpOverload tagged torch.Tag.pointwise that a chain may take."""
    return _kind_of(op) == "pointwise"


def is_reduction(op: object) -> bool:
    """True for the reductions that may end a chain (sum/mean/amax/amin/prod over dims)."""
    return _kind_of(op) == "reduction"


def is_fusible(op: object) -> bool:
    return _kind_of(op) != ""


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
            f"({', '.join(CHAIN_ENDING_REDUCTIONS)})")
