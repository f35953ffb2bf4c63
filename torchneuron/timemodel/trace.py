"""A step's ops without running them: the model is built and run under PyTorch's FakeTensorMode
(shapes and dtypes only, no memory), and a dispatch mode records every ATen op it issues with
its operands' shapes and dtypes and its FLOPs (torch.utils.flop_counter's formulas). A 70B model
at full size traces in seconds, on a machine that could not hold a layer of it.

`collective(kind, tensor, group)` marks where a sharded model communicates (it returns the
tensor unchanged: nothing is sent); `mark_resident(tensor)` names tensors that live in HBM
between steps (weights, KV caches), which a compiled graph reads from HBM whatever their size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
# internal: see runtime/torch_internals.py "torch._subclasses.fake_tensor.FakeTensorMode"
from torch._subclasses.fake_tensor import FakeTensorMode
# internal: see runtime/torch_internals.py "torch.utils._python_dispatch.TorchDispatchMode"
from torch.utils._python_dispatch import TorchDispatchMode
# internal: see runtime/torch_internals.py "torch.utils._pytree.tree_flatten"
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

_ACTIVE: list["_Recorder"] = []


@dataclass
class Operand:
    shape: tuple[int, ...]
    dtype: torch.dtype
    resident: str | None = None  # "weight" or "cache": lives in HBM, read from it in any case

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


@dataclass
class OpRecord:
    name: str  # the ATen overload packet's name ("mm", "_softmax"), or "collective"
    inputs: list[Operand]
    outputs: list[Operand]
    flops: int = 0
    collective: str | None = None  # all_reduce, all_gather, ...
    group: str | None = None  # which ranks: "tp", "dp", "fsdp"
    host: bool = False  # runs on the host (a float64 fallback) or reads a value to the host


@dataclass
class Trace:
    ops: list[OpRecord] = field(default_factory=list)

    @property
    def flops(self) -> int:
        return sum(op.flops for op in self.ops)


def _operands(values, resident: dict[int, str]) -> list[Operand]:
    flat, _ = tree_flatten(values)
    return [Operand(tuple(t.shape), t.dtype, _resident_kind(t, resident))
            for t in flat if isinstance(t, torch.Tensor)]


def _resident_kind(t: torch.Tensor, resident: dict[int, str]) -> str | None:
    """A weight or cache itself, or a view of one (a linear layer's `t()` of its weight)."""
    if id(t) in resident:
        return resident[id(t)]
    # internal: see runtime/torch_internals.py "torch.Tensor._base"
    base = t._base
    return resident.get(id(base)) if base is not None else None


class _Recorder(TorchDispatchMode):
    def __init__(self, trace: Trace, resident: dict[int, str]):
        super().__init__()
        self.trace = trace
        self.resident = resident

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func.overloadpacket
        name = packet.__name__
        if name == "_local_scalar_dense":
            # `.item()`: a fake tensor has no value to read. The trace records the host sync and
            # goes on with a zero of the tensor's kind (code that branches on it takes one path).
            self.trace.ops.append(OpRecord(name=name, inputs=_operands(args, self.resident),
                                           outputs=[], host=True))
            dtype = args[0].dtype
            return False if dtype == torch.bool else 0.0 if dtype.is_floating_point else 0
        out = func(*args, **kwargs)
        flops = 0
        if packet in flop_registry:
            flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
        elif "scaled_dot_product" in name and "backward" not in name:
            # The CPU's fused attention has no formula in flop_counter: QK^T and PV.
            q, k = args[0], args[1]
            flops = 4 * q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2] * q.shape[3]
        inputs = _operands((args, kwargs), self.resident)
        self.trace.ops.append(OpRecord(
            name=name, inputs=inputs, outputs=_operands(out, self.resident), flops=flops,
            host=name == "_local_scalar_dense" or any(o.dtype in (torch.float64, torch.complex128)
                                                     for o in inputs)))
        return out


def collective(kind: str, tensor: torch.Tensor, group: str = "tp") -> torch.Tensor:
    """Records a collective on `tensor` in the active trace (nothing is sent); returns it."""
    if _ACTIVE:
        op = Operand(tuple(tensor.shape), tensor.dtype)
        _ACTIVE[-1].trace.ops.append(OpRecord(name="collective", inputs=[op], outputs=[op],
                                              collective=kind, group=group))
    return tensor


def mark_resident(*tensors: torch.Tensor, kind: str = "cache") -> None:
    """`tensors` live in HBM between steps (`kind`: "cache" or "weight")."""
    if _ACTIVE:
        _ACTIVE[-1].resident.update((id(t), kind) for t in tensors)


def trace(build: Callable[[], Any], run: Callable[[Any], Any]) -> Trace:
    """Builds the model with `build()` and traces `run(model)`, both under FakeTensorMode.
    Parameters of an nn.Module that `build` returns (or of the first item of a tuple) are
    resident; `run` may mark more."""
    result = Trace()
    with FakeTensorMode(allow_non_fake_inputs=True):
        built = build()
        module = built[0] if isinstance(built, tuple) else built
        resident: dict[int, str] = {}
        if isinstance(module, torch.nn.Module):
            resident.update((id(p), "weight") for p in module.parameters())
            resident.update((id(b), "weight") for b in module.buffers())
        recorder = _Recorder(result, resident)
        _ACTIVE.append(recorder)
        try:
            with recorder:
                run(built)
        finally:
            _ACTIVE.pop()
    return result
