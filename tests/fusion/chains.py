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


def activations():
    """A long chain of activations, comparisons and clamps (float32): GELU, SiLU, erf, a
    division, maximum with a second input, a comparison feeding where, and kwargs. (Dividing by
    exp(y), not y: erf of tiny values in Inductor's vectorized code is accurate to ~1e-7
    absolute, not relative, and a division by a tiny y magnified that to 1e-3.)"""
    x, y = torch.randn(48, 80), torch.randn(48, 80)
    return _chain((x, y), (
        Step(aten.gelu.default, (InputRef(0),), {"approximate": "tanh"}),
        Step(aten.silu.default, (InputRef(1),)),
        Step(aten.maximum.default, (StepRef(0), StepRef(1))),
        Step(aten.erf.default, (StepRef(2),)),
        Step(aten.exp.default, (InputRef(1),)),
        Step(aten.div.Tensor, (StepRef(3), StepRef(4))),
        Step(aten.clamp.default, (StepRef(5), -3.0, 3.0)),
        Step(aten.lt.Scalar, (InputRef(0), 0)),
        Step(aten.where.self, (StepRef(7), StepRef(6), InputRef(0))),
        Step(aten.abs.default, (StepRef(8),)),
        Step(aten.sqrt.default, (StepRef(9),)),
        Step(aten.rsub.Scalar, (StepRef(10), 1)),
        Step(aten.neg.default, (StepRef(11),)),
    ), (Output(12),))


def bfloat16_sum():
    """bfloat16 arithmetic (intermediates rounded as eager rounds them) summed over dim 0 into
    float32 (the reduction's dtype argument)."""
    x = torch.randn(40, 64, dtype=torch.bfloat16)
    y = torch.randn(64, dtype=torch.bfloat16)
    return _chain((x, y), (
        Step(aten.mul.Tensor, (InputRef(0), InputRef(1))),
        Step(aten.add.Tensor, (StepRef(0), InputRef(0))),
        Step(aten.sum.dim_IntList, (StepRef(1), [0]), {"dtype": torch.float32}),
    ), (Output(2),))


ALL = {"arithmetic": arithmetic, "promoting": promoting, "mean_end": mean_end,
       "amax_end": amax_end, "in_place": in_place, "activations": activations,
       "bfloat16_sum": bfloat16_sum}
