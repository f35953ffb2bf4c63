"""The hot collectives (the ones DDP, FSDP2 and TP issue every step) called on the group's gloo
backend directly, as PyTorch's own CPU kernels in c10d/Ops.cpp do, instead of dispatching the
c10d op a second time: that second dispatch from Python costs ~40 us per call unloaded (argument
boxing; the GIL stays held while gloo enqueues), against ~15 us here. Other ops take the
generic path in collectives.py."""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist
# internal: see runtime/torch_internals.py "_distributed_c10d option classes"
# internal: see runtime/torch_internals.py "torch.ops.c10d.<op>.default._schema"
from torch._C._distributed_c10d import (AllgatherOptions, AllreduceOptions, BroadcastOptions,
                                        ReduceScatterOptions)

from .._C import aten as _aten_c


def _options(cls, trailing: tuple):
    """Options from the op's optional trailing (async_op=True, timeout=-1) arguments; the
    dispatcher leaves out the ones still at their defaults."""
    opts = cls()
    async_op = trailing[0] if len(trailing) > 0 else True
    timeout = trailing[1] if len(trailing) > 1 else -1
    opts.asyncOp = bool(async_op)
    if timeout is not None and timeout >= 0:
        opts.timeout = datetime.timedelta(milliseconds=timeout)
    return opts


_PREMUL_SUM = int(dist.ReduceOp.RedOpType.PREMUL_SUM)
# gloo's ReduceOp for each op code, made once (opts copy it); PREMUL_SUM cannot be made this way.
_REDUCE_OPS = {int(code): dist.ReduceOp(code) for code in dist.ReduceOp.RedOpType.__members__.values()
               if int(code) != _PREMUL_SUM}
_CPU = torch.device("cpu")


# internal: see runtime/torch_internals.py "c10d::ReduceOp::supplement_ / PreMulSumSupplement"
def _set_reduce_op(opts, reduce_op) -> float | None:
    """Puts the call's reduce op into opts. NCCL's PREMUL_SUM(f), which gloo lacks (FSDP2 uses it
    for a gradient divide factor other than the group size), becomes SUM: the factor is returned
    for the caller to scale the inputs by, which is what PREMUL_SUM means."""
    code = reduce_op.op()
    if code == _PREMUL_SUM:
        opts.reduceOp = _REDUCE_OPS[int(dist.ReduceOp.RedOpType.SUM)]
        return torch.ops.torchneuron.premul_sum_factor(reduce_op)
    opts.reduceOp = _REDUCE_OPS[code]
    return None


# internal: see runtime/torch_internals.py "ProcessGroup private backend table"
# internal: see runtime/torch_internals.py "ProcessGroupGloo private collectives"
def _cpu_backend(group: dist.ProcessGroup):
    return group._get_backend(_CPU)


def allreduce_(group, cpu, args):
    # (tensors, group, reduce_op, sparse_indices, async_op, timeout) -> (tensors, work)
    if args[3] is not None:
        return None  # sparse: the generic path
    opts = _options(AllreduceOptions, args[4:])
    factor = _set_reduce_op(opts, args[2])
    if factor is not None:
        for t in cpu[0]:  # all_reduce overwrites its tensors, so they may be scaled in place
            t.mul_(factor)
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
    opts = _options(ReduceScatterOptions, args[4:])
    factor = _set_reduce_op(opts, args[3])
    # The input stays as the caller passed it: a scaled copy, in neuron memory, is reduced.
    source = cpu[1] if factor is None else _aten_c.cpu_alias(args[1] * factor)
    return args[0], _cpu_backend(group)._reduce_scatter_base(cpu[0], source, opts).boxed()


DIRECT = {f.__name__: f for f in (allreduce_, broadcast_, _allgather_base_,
                                   _reduce_scatter_base_)}
