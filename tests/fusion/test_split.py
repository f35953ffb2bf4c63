"""Splitting a queue's ops into fusible chains."""

from __future__ import annotations

import torch

from torchneuron.fusion import QueuedOp, split_chains

aten = torch.ops.aten
N = (8, 16)


def q(op, shape=N):
    return QueuedOp(op, shape)


def test_unfusible_ops_break_chains_and_single_ops_are_left_out():
    ops = [q(aten.mul.Tensor), q(aten.add.Tensor), q(aten.mm.default, (8, 8)),
           q(aten.neg.default), q(aten.view.default), q(aten.exp.default), q(aten.sin.default),
           q(aten.cos.default)]
    assert split_chains(ops) == [range(0, 2), range(5, 8)]


def test_broadcast_compatible_shapes_share_a_chain():
    ops = [q(aten.mul.Tensor, (8, 1)), q(aten.add.Tensor, (1, 16)), q(aten.exp.default, (16,)),
           q(aten.neg.default, (8, 16))]
    assert split_chains(ops) == [range(0, 4)]


def test_a_shape_that_does_not_broadcast_starts_a_new_chain():
    ops = [q(aten.mul.Tensor), q(aten.add.Tensor), q(aten.exp.default, (3, 5)),
           q(aten.neg.default, (3, 5))]
    assert split_chains(ops) == [range(0, 2), range(2, 4)]


def test_a_reduction_ends_a_chain():
    ops = [q(aten.pow.Tensor_Scalar), q(aten.mean.dim), q(aten.rsqrt.default, (8, 1)),
           q(aten.mul.Tensor), q(aten.sum.default), q(aten.amax.default)]
    assert split_chains(ops) == [range(0, 2), range(2, 5)]


def test_deterministic_algorithms_turn_fusion_off():
    ops = [q(aten.mul.Tensor), q(aten.add.Tensor)]
    torch.use_deterministic_algorithms(True)
    try:
        assert split_chains(ops) == []
    finally:
        torch.use_deterministic_algorithms(False)
    assert split_chains(ops) == [range(0, 2)]
