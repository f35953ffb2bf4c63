"""The hot collectives (the ones DDP, FSDP2 and TP issue every step) called on the group's gloo
backend directly, as PyTorch's own CPU kernels in c10d/Ops.cpp do, instead of dispatching the
c10d op a second time: that second dispatch from Python costs ~40 us per call unloaded (argument
boxing; the GIL stays held while gloo enqueues), against ~15 us here. Other ops take the
generic path in collectives.py."""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllgatherOptions, AllreduceOptions, BroadcastOptions,
                                        ReduceScatterOptions)


def _options(cls, trailing: tuple, reduce_op=None):
    """Options from the op's optional trailing (async_op=True, timeout=-1) arguments; the
    dispatcher leaves out the ones still at their defaults."""
    opts = cls()
    async_op = trailing[0] if len(trailing) > 0 else True
    timeout = trailing[1] if len(trailing) > 1 else -1
    opts.asyncOp = bool(async_op)
    if timeout is not None and timeout >= 0:
        opts.timeout = datetime.timedelta(milliseconds=timeout)
    if reduce_op is not None:
        opts.reduceOp = dist.ReduceOp(dist.ReduceOp.RedOpType(reduce_op.op()))
    return opts


def _cpu_backend(group: dist.ProcessGroup):
    return group._get_backend(torch.device("cpu"))


def allreduce_(group, cpu, args):
    # (tensors, group, reduce_op, sparse_indices, async_op, timeout) -> (tensors, work)
    if args[3] is not None:
        return None  # sparse: the generic path
    opts = _options(AllreduceOptions, args[4:], reduce_op=args[2])
    return args[0], _cpu_backend(group).allreduce(cpu[0], opts).boxed()


def broadcast_(group, cpu, args):
    # (tensors, group, root_rank, root_tensor, async_op, timeout) -> (tensors, work)
    opts = _options(BroadcastOptions, args[4:])
    opts.rootRank, opts.rootTensor = args[2], args[3]
    return args[0], _cpu_backend(group).broadcast(cpu[0], opts).boxed()


def _allgather_base_(group, cpu, args):
    # (output, input, group, async_op, timeout) -> (output, work)
    opts = _options(AllgatherOptions, args[3:])
    return args[0], _cpu_backend(group)._allgather_base(cpu[0], cpu[1], opts).boxed()


def _reduce_scatter_base_(group, cpu, args):
    # (output, input, group, reduce_op, async_op, timeout) -> (output, work)
    opts = _options(ReduceScatterOptions, args[4:], reduce_op=args[3])
    return args[0], _cpu_backend(group)._reduce_scatter_base(cpu[0], cpu[1], opts).boxed()


DIRECT = {f.__name__: f for f in (allreduce_, broadcast_, _allgather_base_,
                                   _reduce_scatter_base_)}
