"""Chunked F.linear_cross_entropy on neuron accumulates float16/bfloat16 as the CPU does
(float32; torchneuron/ops/linear_cross_entropy.py), so loss and gradients equal the CPU's."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_chunked_matches_cpu(dtype, reduction):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 16, generator=g, dtype=dtype)
    w = torch.randn(100, 16, generator=g, dtype=dtype)
    target = torch.randint(0, 100, (64,), generator=g)
    results = {}
    for device in ("cpu", "neuron"):
        xd = x.to(device, copy=True).requires_grad_()
        wd = w.to(device, copy=True).requires_grad_()
        loss = F.linear_cross_entropy(xd, wd, target.to(device), reduction=reduction,
                                      options=LinearCrossEntropyOptions())
        loss.sum().backward()
        results[device] = [t.detach().cpu() for t in (loss, xd.grad, wd.grad)]
    for got, expected in zip(results["neuron"], results["cpu"]):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_neuron_resolves_the_cpu_defaults():
    options = LinearCrossEntropyOptions()._adjust(64, 16, 100, torch.bfloat16,
                                                  torch.device("neuron"))
    cpu = LinearCrossEntropyOptions()._adjust(64, 16, 100, torch.bfloat16, torch.device("cpu"))
    assert options == cpu
    assert options.acc_dtype == torch.float32
