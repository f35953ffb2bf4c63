"""How c10d collectives run on neuron tensors: PyTorch routes every `c10d::*` op whose tensors are
on neuron to its PrivateUse1 kernel. We replace those kernels with one that checks the tensors'
device, checks that all ranks agree on the call (agreement.py), swaps each neuron tensor for a CPU
alias of the same memory (no copy: neuron memory is host memory on the software NeuronCore) and
calls the same op again, which now runs gloo's CPU implementation on the group's gloo backend.
Outputs land directly in the neuron tensors. An asynchronous collective that is checked, issued
from a backward pass (DDP's and FSDP's gradient hooks), returns at once and is checked and started
on the group's sequencing thread (sequencer.py).
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import torch
import torch.distributed as dist

from .._C import aten as _aten_c
from ..runtime import activity
from . import agreement, direct_calls, forensics, sequencer

# The c10d ops with a PrivateUse1 kernel in PyTorch (torch/csrc/distributed/c10d/Ops.cpp), and
# the position of the first tensor argument of each one, to find the group right after it.
# monitored_barrier_ has no device kernel at all: it always runs on CPU.
C10D_OPS = (
    "allreduce_", "allreduce_coalesced_", "broadcast_", "reduce_", "allgather_",
    "_allgather_base_", "allgather_coalesced_", "allgather_into_tensor_coalesced_",
    "reduce_scatter_", "_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_",
    "alltoall_", "alltoall_base_", "gather_", "scatter_", "send", "recv_", "recv_any_source_",
    "barrier",
)

_lock = threading.Lock()
_CPU = torch.device("cpu")
# Which neuron device this process communicates on: one process, one device, as with NCCL. Set
# by the first collective (or by a group's `device_id`), checked by every later one.
_process_device: int | None = None


class _Aliases:
    """Replaces neuron tensors, also inside (nested) lists, by CPU aliases; records devices."""

    def __init__(self) -> None:
        self.neuron_devices: set[int] = set()
        self.has_cpu = False
        self.aliases: list[torch.Tensor] = []
        self.originals: list[torch.Tensor] = []

    def convert(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.device.type == "neuron":
                self.neuron_devices.add(value.device.index)
                alias = _aten_c.cpu_alias(value)
                self.aliases.append(alias)
                self.originals.append(value)
                return alias
            if value.device.type == "cpu":
                self.has_cpu = True
            return value
        if isinstance(value, list):
            return [self.convert(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.convert(v) for v in value)
        return value


# A CPU alias is a temporary Python tensor: dropped by Python while gloo's Work still holds it, it
# would pass its Python object to C++, and gloo's worker thread would take the GIL to free it when
# it drops the Work, just after the collective completed. Python may be exiting by then: a thread
# that asks for the GIL during interpreter finalization is ended by CPython, and ending a thread
# inside gloo's C++ aborts the process ("terminate called without an active exception", seen at
# the exit of a DDP rank whose last call was a synchronous collective). So a synchronous
# collective waits at its end until gloo's worker let go of the Work (its reference count is that
# of a Work only Python holds), and the Work and its aliases are then freed on this thread.
_LET_GO_WAIT_S = 1.0  # gloo drops its Work right after completing it (microseconds); a busy
# machine may deschedule its thread in between
_lone_work_count: int | None = None  # the reference count of a Work that only Python holds


def _release_after(work, aliases: list[torch.Tensor]) -> None:
    """A synchronous collective: waits for it (its caller waits next anyway) and for gloo's
    worker to let go of its Work (bounded: past it, gloo's thread frees the aliases as before)."""
    global _lone_work_count
    if not aliases:
        return
    work.wait()
    count = torch.ops.torchneuron.work_use_count
    if _lone_work_count is None:
        _lone_work_count = count(torch.ops.torchneuron.deferred_work())
    deadline = time.monotonic() + _LET_GO_WAIT_S
    while count(work) > _lone_work_count and time.monotonic() < deadline:
        time.sleep(0)


def _group_of(args: tuple) -> dist.ProcessGroup | None:
    for a in args:
        if isinstance(a, torch.ScriptObject):
            return dist.ProcessGroup.unbox(a)
    return None


def _check_device(op_name: str, group: dist.ProcessGroup, aliases: _Aliases) -> None:
    """One device per collective and per process; it is the error NCCL would give a hang for."""
    global _process_device
    if not aliases.has_cpu and len(aliases.neuron_devices) == 1 and group.bound_device_id is None:
        (index,) = aliases.neuron_devices
        if index == _process_device:  # the common case, checked first: it runs every call
            return
    where = f"c10d::{op_name} on rank {dist.get_rank()}" if dist.is_initialized() else op_name
    if aliases.has_cpu:
        raise RuntimeError(
            f"{where}: Expected all tensors to be on the same device, but found neuron and cpu "
            "tensors in one collective of the neuron backend")
    if len(aliases.neuron_devices) > 1:
        found = ", ".join(f"neuron:{i}" for i in sorted(aliases.neuron_devices))
        raise RuntimeError(f"{where}: Expected all tensors to be on the same device, but found "
                           f"{found}")
    (index,) = aliases.neuron_devices
    bound = group.bound_device_id
    if bound is not None and bound.type == "neuron" and bound.index is not None:
        expected, why = bound.index, "init_process_group(device_id=...)"
    else:
        with _lock:
            if _process_device is None:
                _process_device = index
        expected, why = _process_device, "the device of its first collective"
    if index != expected:
        raise RuntimeError(
            f"{where}: got a tensor on neuron:{index}, but this rank communicates on "
            f"neuron:{expected} ({why}). Each process uses one neuron device: call "
            "torch.neuron.set_device(local_rank) and put the tensors on it.")


# internal: see runtime/torch_internals.py "ProcessGroup private backend table"
def _ensure_cpu_backend(group: dist.ProcessGroup) -> None:
    """A group made for neuron alone (init_process_group() with no backend named) has no CPU
    entry, but the CPU aliases dispatch to the CPU one: give it the same gloo backend. Its default
    backend type is then gloo, which is what PyTorch already assumed for such a group."""
    if _CPU in group._device_types:
        return
    with _lock:
        if _CPU not in group._device_types:
            backend = group._get_backend(torch.device("neuron"))
            group._register_backend(_CPU, dist.ProcessGroup.BackendType.GLOO, backend)


# internal: see runtime/torch_internals.py "torch.ops.c10d.<op>.default._schema"
def _async_op_index(op) -> int | None:
    names = [a.name for a in op._schema.arguments]
    return names.index("async_op") if "async_op" in names else None


def _neuron_work(work, aliases: _Aliases):
    """gloo's Work, reporting the caller's neuron tensors as its results instead of aliases."""
    return torch.ops.torchneuron.neuron_work(work, aliases.aliases, aliases.originals)


def _kernel(op_name: str):
    op = getattr(torch.ops.c10d, op_name).default
    direct = direct_calls.DIRECT.get(op_name)
    async_index = _async_op_index(op)
    returns_tensors = len(op._schema.returns) > 1  # (the first argument, updated; Work)

    def start(group, args, cpu_args):
        """Checks that the ranks agree, then starts the collective on gloo: the op's result."""
        agreement.check(op_name, args, group)
        return activity.run_recorded(f"c10d::{op_name}", lambda: launch(group, args, cpu_args),
                                     args)

    def launch(group, args, cpu_args):
        result = direct(group, cpu_args, args) if direct is not None else None
        if result is None:
            result = op(*cpu_args)
            # Hand back the caller's neuron tensors rather than their aliases.
            if isinstance(result, tuple):
                result = (args[0], *result[1:])
        return result

    def run_on_cpu_aliases(*args):
        aliases = _Aliases()
        cpu_args = tuple(aliases.convert(a) for a in args)
        group = _group_of(args)
        _check_device(op_name, group, aliases)
        _ensure_cpu_backend(group)
        # Only a caller of an asynchronous op (async_op=True, which is also the default C++
        # callers such as DDP's reducer get; point-to-point ops) sees the Work; synchronous
        # calls wait on it inside torch.distributed and skip the wrapping.
        synchronous = async_index is not None and len(args) > async_index and not args[async_index]
        if not synchronous and sequencer.defers(op_name, group):
            work = sequencer.deferred(sequencer.for_group(group), lambda: _neuron_work(
                _work_of(start(group, args, cpu_args)), aliases))
            return (args[0], work) if returns_tensors else work
        turn = sequencer.existing(group)  # a group that never deferred has no thread to wait on
        if turn is not None and turn.busy():
            result = turn.start_in_turn(lambda: start(group, args, cpu_args))
        else:
            result = start(group, args, cpu_args)
        if synchronous:
            try:
                _release_after(_work_of(result), aliases.aliases)
            except RuntimeError as e:
                if not forensics.breaks_group(e):
                    raise  # an argument gloo refuses: nothing was lost
                raise forensics.gloo_failed(op_name, group, e) from e  # names the lost peer
            return result
        if isinstance(result, tuple):
            return (*result[:-1], _neuron_work(result[-1], aliases))
        return _neuron_work(result, aliases)

    run_on_cpu_aliases.__name__ = f"neuron_{op_name}"
    return run_on_cpu_aliases


def _work_of(result):
    return result[-1] if isinstance(result, tuple) else result


_library: torch.library.Library | None = None


def register_kernels() -> None:
    """Installs the PrivateUse1 kernels of the c10d ops (once per process)."""
    global _library
    if _library is not None:
        return
    lib = torch.library.Library("c10d", "IMPL")
    with warnings.catch_warnings():
        # PyTorch's own PrivateUse1 kernels only look up a backend registered for the device;
        # replacing them is the point, so the "overriding a kernel" warning says nothing new.
        warnings.filterwarnings("ignore", message=".*Overriding a previously registered kernel")
        warnings.filterwarnings("ignore", message=".*Warning only once for all operators")
        for name in C10D_OPS:
            lib.impl(name, _kernel(name), "PrivateUse1")
    _library = lib
