"""Autograd's efficient zero tensors on neuron (csrc/aten/native/ZeroTensors.cpp). They used to
come back from the CPU fallback as plain neuron tensors over no memory: reading one crashed the
process."""

import torch
from torch.testing import assert_close


def test_efficient_zero_tensor_keeps_its_key_and_reads_as_zeros():
    z = torch._efficientzerotensor((2, 3), dtype=torch.float32, device="neuron")
    assert z._is_zerotensor() and z.device.type == "neuron"
    assert_close(z.cpu(), torch.zeros(2, 3))
    assert_close((z + 1).cpu(), torch.ones(2, 3))


def test_sgn_gradient_on_real_input_matches_cpu():
    # sgn's backward on real inputs returns an efficient zero tensor: the original crash.
    x = torch.randn(4, 3)
    g = torch.randn(4, 3)
    grads = {}
    for device in ("cpu", "neuron"):
        xd = x.to(device).requires_grad_()
        (grads[device],) = torch.autograd.grad(xd.sgn(), xd, g.to(device))
    assert grads["neuron"].device.type == "neuron"
    assert_close(grads["neuron"].cpu(), grads["cpu"])
