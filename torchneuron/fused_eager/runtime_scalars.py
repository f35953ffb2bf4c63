"""Floats a fused kernel reads at each call instead of compiling them in.

An optimizer's step size and bias corrections, or a learning-rate schedule, change every step; a
kernel with the value compiled in would serve one step. So a Python float a chained op receives
is a *runtime scalar* (chain.RuntimeScalar): the graph takes it as a 0-d float64 tensor and the
queue hands the kernel each call's value. The execution queue (csrc/fused_eager/)
decides which floats qualify: a wrapped number (`x * 0.5`, a Tensor-typed position) whenever an
operand with dimensions is float32 or float64, and the Scalar-typed arguments listed here. A
Scalar-typed argument cannot take a tensor, so each listed op has a form written with the number
as a tensor, in the order Inductor's own lowering of the op computes it (on a CPU-like device):
fused results equal those with the value compiled in. Other Scalar-typed floats (a clamp bound, a
pow exponent) stay compiled in: their kernels specialize on the value."""

from __future__ import annotations

from typing import Any, Callable

import torch

aten = torch.ops.aten
Call = Callable[..., Any]


# Each form is written against `call(op, *args, **kwargs)`, which adds a node to a graph (or, in
# tests, runs the op), so one text serves both.

def _add(call: Call, self: Any, other: Any, alpha: Any) -> Any:
    # Inductor: self + other * alpha, the alpha rounded to the result's type by the mul
    return call(aten.add.Tensor, self, call(aten.mul.Tensor, other, alpha))


def _sub(call: Call, self: Any, other: Any, alpha: Any) -> Any:
    return call(aten.sub.Tensor, self, call(aten.mul.Tensor, other, alpha))


def _addcmul(call: Call, self: Any, tensor1: Any, tensor2: Any, value: Any) -> Any:
    # Inductor's lowering off CUDA: self + value * (tensor1 * tensor2)
    return call(aten.add.Tensor, self,
                call(aten.mul.Tensor, value, call(aten.mul.Tensor, tensor1, tensor2)))


def _addcdiv(call: Call, self: Any, tensor1: Any, tensor2: Any, value: Any) -> Any:
    # Inductor's lowering off CUDA: self + value * (tensor1 / tensor2)
    return call(aten.add.Tensor, self,
                call(aten.mul.Tensor, value, call(aten.div.Tensor, tensor1, tensor2)))


def _lerp(call: Call, self: Any, end: Any, weight: Any) -> Any:
    # Inductor's decomposition of lerp.Scalar picks a formula by the weight's value (for
    # precision near either end): end + (end - self) * -(1 - w) when |w| >= 0.5, else
    # self + (end - self) * w. With the weight known only at run time both are computed and
    # one is selected per call; -(1 - w) is w - 1 exactly, in float64 as in Python.
    diff = call(aten.sub.Tensor, end, self)
    high = call(aten.add.Tensor, end,
                call(aten.mul.Tensor, diff, call(aten.sub.Tensor, weight, 1)))
    low = call(aten.add.Tensor, self, call(aten.mul.Tensor, diff, weight))
    near_end = call(aten.ge.Scalar, call(aten.abs.default, weight), 0.5)
    return call(aten.where.self, near_end, high, low)


# op -> (its Scalar-typed argument read at run time, the op written with that argument as a
# tensor; called with `call` and the op's arguments in schema order, that one a 0-d float64
# tensor).
RUNTIME_SCALARS: dict[Any, tuple[str, Callable[..., Any]]] = {
    aten.add.Tensor: ("alpha", _add),
    aten.sub.Tensor: ("alpha", _sub),
    aten.addcmul.default: ("value", _addcmul),
    aten.addcdiv.default: ("value", _addcdiv),
    aten.lerp.Scalar: ("weight", _lerp),
}


def configured_names() -> list[tuple[str, str]]:
    """The table as the C++ core names ops: ("aten::add.Tensor", "alpha")."""
    # internal: see runtime/torch_internals.py "torch._ops.OpOverload._schema"
    return sorted((f"{op._schema.name}.{op._overloadname}", argument)
                  for op, (argument, _) in RUNTIME_SCALARS.items())


def argument_position(op: Any) -> int | None:
    """The schema position of `op`'s runtime-scalar argument; None for an unlisted op."""
    entry = RUNTIME_SCALARS.get(op)
    if entry is None:
        return None
    names = [a.name for a in op._schema.arguments]
    return names.index(entry[0])


def tensor_form(op: Any) -> Callable[..., Any]:
    """The op written with its runtime-scalar argument as a 0-d tensor: form(call, *arguments)."""
    return RUNTIME_SCALARS[op][1]
