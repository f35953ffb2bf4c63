"""Chains the fusion tests share, each with inputs to run it on. Inductor compiles take seconds,
so each chain is compiled once per test session (conftest.py's `compiled` fixture)."""

from __future__ import annotations

import torch

from torchneuron.fused_eager import Chain, InputRef, Output, Scalar, Step, StepRef, TensorSpec

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


def twenty_ops(n=1 << 20):
    """Twenty float32 pointwise ops on two vectors of `n` elements (the fused-eager benchmark's
    chain too): arithmetic, comparisons, clamps and a sigmoid, one output."""
    x, y = torch.randn(n), torch.randn(n)
    return _chain((x, y, 0.5), (
        Step(aten.mul.Tensor, (InputRef(0), InputRef(1))),      # 0
        Step(aten.add.Tensor, (StepRef(0), InputRef(2))),       # 1
        Step(aten.sub.Tensor, (StepRef(1), InputRef(0))),       # 2
        Step(aten.mul.Tensor, (StepRef(2), 1.5)),               # 3
        Step(aten.abs.default, (StepRef(3),)),                  # 4
        Step(aten.add.Tensor, (StepRef(4), 1.0)),               # 5
        Step(aten.div.Tensor, (InputRef(1), StepRef(5))),       # 6
        Step(aten.maximum.default, (StepRef(6), StepRef(2))),   # 7
        Step(aten.neg.default, (StepRef(7),)),                  # 8
        Step(aten.sigmoid.default, (StepRef(8),)),              # 9
        Step(aten.mul.Tensor, (StepRef(9), InputRef(0))),       # 10
        Step(aten.clamp.default, (StepRef(10), -2.0, 2.0)),     # 11
        Step(aten.gt.Scalar, (StepRef(11), 0)),                 # 12
        Step(aten.where.self, (StepRef(12), StepRef(11), StepRef(6))),  # 13
        Step(aten.minimum.default, (StepRef(13), InputRef(1))),  # 14
        Step(aten.sub.Tensor, (StepRef(14), StepRef(0)), {"alpha": 0.25}),  # 15
        Step(aten.mul.Tensor, (StepRef(15), StepRef(15))),      # 16
        Step(aten.add.Tensor, (StepRef(16), InputRef(1))),      # 17
        Step(aten.rsub.Scalar, (StepRef(17), 3)),               # 18
        Step(aten.mul.Tensor, (StepRef(18), 0.125)),            # 19
    ), (Output(19),))


def sum_end():
    """Pointwise ops feeding a full sum (a 0-d result)."""
    x, y = torch.randn(300, 70), torch.randn(70)
    return _chain((x, y), (
        Step(aten.mul.Tensor, (InputRef(0), InputRef(1))),
        Step(aten.add.Tensor, (StepRef(0), 2.0)),
        Step(aten.sum.default, (StepRef(1),)),
    ), (Output(2),))


def scaled_by_tensor():
    """`x * lr` with lr a 0-d float64 tensor (how the queue passes a Python number, so that a
    changing learning rate keeps one signature): float32 result, as eager's."""
    x = torch.randn(5000)
    return _chain((x, torch.tensor(0.01, dtype=torch.float64)), (
        Step(aten.mul.Tensor, (InputRef(0), InputRef(1))),
    ), (Output(0),))


def strided():
    """Non-contiguous inputs: every third column, a transposed matrix, a broadcast (stride 0)
    column; the result is written into the first input (an in-place update of a strided view)."""
    x = torch.randn(32, 96)[:, ::3]
    y = torch.randn(32, 32).t()
    z = torch.randn(32, 1).expand(32, 32)
    return _chain((x, y, z), (
        Step(aten.mul.Tensor, (InputRef(0), InputRef(1))),
        Step(aten.add.Tensor, (StepRef(0), InputRef(2))),
        Step(aten.tanh.default, (StepRef(1),)),
    ), (Output(2, into_input=0), Output(1)))


def _low_precision(dtype):
    x, y = torch.randn(64, 100, dtype=dtype), torch.randn(100, dtype=dtype)
    return _chain((x, y, 0.5), (
        Step(aten.mul.Tensor, (InputRef(0), InputRef(1))),
        Step(aten.add.Tensor, (StepRef(0), InputRef(2))),
        Step(aten.sigmoid.default, (StepRef(1),)),
        Step(aten.mul.Tensor, (StepRef(2), InputRef(0))),
        Step(aten.sub.Tensor, (StepRef(3), StepRef(0))),
    ), (Output(4),))


def float16_pointwise():
    """float16 arithmetic and a sigmoid (intermediates rounded as eager rounds them)."""
    return _low_precision(torch.float16)


def bfloat16_pointwise():
    """bfloat16 arithmetic and a sigmoid (intermediates rounded as eager rounds them)."""
    return _low_precision(torch.bfloat16)


ALL.update({"twenty_ops": twenty_ops, "sum_end": sum_end, "scaled_by_tensor": scaled_by_tensor,
            "strided": strided, "float16_pointwise": float16_pointwise,
            "bfloat16_pointwise": bfloat16_pointwise})


def on_device(inputs, device):
    """`inputs` with each tensor copied to `device` in the same layout (sizes, strides, storage
    offset): the compiled chain checks the layout it was compiled for. The storage the tensor
    spans is copied, so broadcast (stride 0) inputs keep their strides too."""
    moved = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            spec = TensorSpec.of(x)
            span = x.as_strided((spec.extent(),), (1,), spec.storage_offset)
            base = torch.zeros(spec.storage_offset + spec.extent(), dtype=x.dtype, device=device)
            base[spec.storage_offset:].copy_(span)
            x = base.as_strided(spec.size, spec.stride, spec.storage_offset)
        moved.append(x)
    return moved
