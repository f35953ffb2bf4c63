"""Chains the fusion tests share, each with inputs to run it on. Inductor compiles take seconds,
so each chain is compiled once per test session (conftest.py's `compiled` fixture)."""

from __future__ import annotations

import torch

from torchneuron.fusion import Chain, InputRef, Output, Scalar, Step, StepRef, TensorSpec

aten = torch.ops.aten


def _chain(inputs, steps, outputs):
    specs = tuple(Scalar(x) if not isinstance(x, torch.Tensor) else TensorSpec.of(x)
                  for x in inputs)
    return Chain(specs, steps, outputs), list(inputs)


def arithmetic():
    """Pure pointwise, float32, with a broadcast operand and a scalar: one kernel, and the same
    op order as eager (bitwise equal)."""
    x, y = torch.randn(96, 33), torch.randn(33)
    return _chain((x, y, 0.5), (
        Step(aten.mul.Tensor, (InputRef(0), InputRef(1))),
        Step(aten.add.Tensor, (StepRef(0), InputRef(2))),
        Step(aten.sub.Tensor, (StepRef(1), InputRef(0)), {"alpha": 2}),
        Step(aten.mul.Tensor, (StepRef(2), StepRef(1))),
    ), (Output(3),))


def promoting():
    """Type promotion (int32 + int scalar, then with float16, a bool mask), a transposed input,
    an input at a storage offset, transcendental ops, and an intermediate written out too."""
    base = torch.randint(-5, 5, (40, 24), dtype=torch.int32)
    x = base.t()  # (24, 40), non-contiguous
    y = torch.randn(1 + 40, dtype=torch.float16)[1:]  # storage offset 1, broadcast over rows
    mask = torch.rand(24, 1) > 0.5
    return _chain((x, y, mask, 3), (
        Step(aten.add.Tensor, (InputRef(0), InputRef(3))),
        Step(aten.mul.Tensor, (StepRef(0), InputRef(1))),
        Step(aten.sigmoid.default, (StepRef(1),)),
        Step(aten.where.self, (InputRef(2), StepRef(2), StepRef(1))),
        Step(aten.tanh.default, (StepRef(3),)),
    ), (Output(1), Output(4)))


def mean_end():
    """RMSNorm's statistics: pointwise ops feeding a mean over the last dim (keepdim)."""
    x = torch.randn(64, 128)
    return _chain((x, 1e-6), (
        Step(aten.pow.Tensor_Scalar, (InputRef(0), 2)),
        Step(aten.mean.dim, (StepRef(0), [-1], True)),
    ), (Output(1),))


def amax_end():
    """A full reduction ending a chain of transcendental ops, both results written."""
    x = torch.randn(50, 70)
    return _chain((x,), (
        Step(aten.exp.default, (InputRef(0),)),
        Step(aten.log1p.default, (StepRef(0),)),
        Step(aten.amax.default, (StepRef(1),)),
    ), (Output(1), Output(2)))


def in_place():
    """x.mul_(y).add_(1) queued as functional ops whose final result goes back into x."""
    x, y = torch.randn(32, 16), torch.randn(32, 16)
    return _chain((x, y, 1.0), (
        Step(aten.mul.Tensor, (InputRef(0), InputRef(1))),
        Step(aten.add.Tensor, (StepRef(0), InputRef(2))),
    ), (Output(1, into_input=0),))


ALL = {"arithmetic": arithmetic, "promoting": promoting, "mean_end": mean_end,
       "amax_end": amax_end, "in_place": in_place}
