"""One neuron tensor passed to a kernel twice (an in-place op that runs as its out= form with
out=self) must reach the CPU kernel as one tensor, so in-place semantics hold: an in-place op
whose result would need a different shape raises, as on CPU, instead of resizing self."""

import pytest
import torch
from torch.testing import assert_close


@pytest.mark.parametrize("op", ["logical_and_", "logical_or_", "logical_xor_"])
def test_inplace_broadcast_into_smaller_self_raises_like_cpu(op):
    a, b = torch.ones(5, 1), torch.ones(5, 5)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape") as cpu:
        getattr(a.clone(), op)(b)
    n = a.to("neuron")
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape") as neuron:
        getattr(n, op)(b.to("neuron"))
    assert str(neuron.value).splitlines()[0] == str(cpu.value).splitlines()[0]
    assert n.shape == (5, 1)


def test_inplace_with_self_as_other_matches_cpu():
    x = torch.randn(4, 3)
    n = x.to("neuron")
    n.logical_xor_(n)
    assert_close(n.cpu(), x.clone().logical_xor_(x))
    y = torch.randn(4, 3)
    m = y.to("neuron")
    torch.add(m, m, out=m)
    assert_close(m.cpu(), y * 2)
