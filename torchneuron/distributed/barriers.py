"""dist.barrier and dist.monitored_barrier on neuron groups.

dist.barrier: on a group of the neuron backend PyTorch runs the barrier on a CPU tensor (the
group's object-collective device is the CPU), so it reaches gloo without passing the backend's
kernels, and a rank that never arrives leaves the others with gloo's bare timeout. The barrier is
checked first like any collective (agreement.py), which is itself a meeting of all ranks: a rank
that does not come is named, one that calls another collective instead is named.

dist.monitored_barrier: PyTorch refuses every group whose backend is not named "gloo" before it
looks at the group; a neuron group's CPU backend is gloo, whose monitored barrier (which names
the ranks that failed to arrive) works as it does for a gloo group."""

from __future__ import annotations

import functools

import torch.distributed as dist
# internal: see runtime/torch_internals.py "distributed_c10d.barrier / monitored_barrier"
from torch.distributed import distributed_c10d as c10d

from . import agreement

_original_barrier = c10d.barrier
_original_monitored_barrier = c10d.monitored_barrier


def _neuron_group(group) -> dist.ProcessGroup | None:
    pg = c10d._get_default_group() if group is None or group is dist.GroupMember.WORLD \
        else group
    if c10d._rank_not_in_group(pg) or c10d.get_backend(pg) != "neuron":
        return None
    return pg


@functools.wraps(_original_barrier)
def barrier(group=dist.GroupMember.WORLD, async_op=False, device_ids=None, timeout=None):
    pg = _neuron_group(group) if dist.is_initialized() else None
    if pg is not None and pg.size() > 1 and agreement.is_enabled():
        agreement.exchange("barrier", (), pg)
    return _original_barrier(group, async_op, device_ids, timeout)


@functools.wraps(_original_monitored_barrier)
def monitored_barrier(group=dist.GroupMember.WORLD, timeout=None, wait_all_ranks=False):
    pg = _neuron_group(group) if dist.is_initialized() else None
    if pg is None:
        return _original_monitored_barrier(group, timeout, wait_all_ranks)
    # PyTorch's own steps after its backend check (distributed_c10d.monitored_barrier).
    if timeout is None:
        timeout = c10d._get_default_timeout(c10d.Backend.GLOO)
    elif isinstance(timeout, float):
        timeout = c10d.timedelta(seconds=timeout)
    c10d._check_valid_timeout(timeout)
    return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


def install() -> None:
    """Both functions, where programs find them (torch.distributed and distributed_c10d)."""
    for module in (dist, c10d):
        module.barrier = barrier
        module.monitored_barrier = monitored_barrier
