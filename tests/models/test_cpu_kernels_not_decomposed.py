"""Bug class found by the model battery (MiniLM in bfloat16): ops with both a CPU kernel and a
CompositeExplicitAutograd kernel (native_layer_norm, native_group_norm, addr, ...) ran on neuron
as the composite decomposition instead of the CPU kernel, one ulp off the CPU; bfloat16 then
rounded differently downstream. They now run the CPU kernel, bit for bit
(csrc/aten/Fallback.cpp)."""

import torch
import torch.nn.functional as F

import torchneuron


def test_layer_norm_and_group_norm_are_routed_to_cpu_kernels():
    assert "native_layer_norm" in torchneuron.ROUTED_TO_CPU_KERNELS
    assert "native_group_norm" in torchneuron.ROUTED_TO_CPU_KERNELS
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    assert all(has(f"aten::{name}", "PrivateUse1") for name in ("native_layer_norm", "addr"))


def test_layer_norm_is_bitwise_equal_to_cpu():
    x, w, b = torch.randn(4, 15, 384), torch.randn(384), torch.randn(384)
    got = F.layer_norm(x.to("neuron"), [384], w.to("neuron"), b.to("neuron"), 1e-12).cpu()
    assert torch.equal(got, F.layer_norm(x, [384], w, b, 1e-12))


def test_group_norm_is_bitwise_equal_to_cpu():
    x = torch.randn(2, 8, 5, 5)
    assert torch.equal(F.group_norm(x.to("neuron"), 4).cpu(), F.group_norm(x, 4))


def test_layer_norm_backward_matches_cpu():
    x = torch.randn(3, 7, 16)
    xn = x.to("neuron").requires_grad_()
    xc = x.clone().requires_grad_()
    F.layer_norm(xn, [16]).pow(2).sum().backward()
    F.layer_norm(xc, [16]).pow(2).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


def test_addr_matches_cpu():
    m, a, b = torch.randn(3, 4), torch.randn(3), torch.randn(4)
    got = torch.addr(m.to("neuron"), a.to("neuron"), b.to("neuron"), beta=0.5, alpha=2).cpu()
    assert torch.equal(got, torch.addr(m, a, b, beta=0.5, alpha=2))
