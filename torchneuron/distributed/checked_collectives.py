"""Which collectives the agreement check covers, which of their arguments must look the same on
every rank, and whether the check is on. The check itself (agreement.py) and the flight
recorder's reading of a waiting collective (flight_recorder.py) both read this table, so that
neither imports the other."""

from __future__ import annotations

import torch

from ..runtime import config

# Which tensors of each op must look the same on every rank (argument positions; the op's
# schema is in torch/csrc/distributed/c10d/Ops.cpp). alltoall_base_ has its own rule.
# internal: see runtime/torch_internals.py "torch.ops.c10d.<op>.default._schema"
AGREEING_ARGS = {
    "allreduce_": 0, "allreduce_coalesced_": 0, "broadcast_": 0, "reduce_": 0,
    "allgather_": 1, "_allgather_base_": 1, "allgather_coalesced_": 1,
    "allgather_into_tensor_coalesced_": 1, "reduce_scatter_": 0, "_reduce_scatter_base_": 0,
    "reduce_scatter_tensor_coalesced_": 0, "alltoall_": 1, "gather_": 1, "scatter_": 0,
}
CHECKED_OPS = tuple(AGREEING_ARGS) + ("alltoall_base_",)
# None: as the configuration says (NEURON_DIST_CHECK), read at the first check, not at import.
enabled: bool | None = None


def is_enabled() -> bool:
    global enabled
    if enabled is None:
        enabled = config.current().dist_check
    return enabled


def flatten_tensors(value) -> list[torch.Tensor]:
    """The tensors of one op argument (a tensor or nested lists of them), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in flatten_tensors(v)]
