"""Composite kernels that call a DispatchStub with the tensor's own device (csrc/
CompositeStubOps.cpp): on neuron they failed an internal assert ("DispatchStub: missing kernel
for neuron"); now they run the CPU kernel on the neuron memory."""

import torch
from torch.testing import assert_close


def test_conj_physical_inplace_matches_cpu():
    x = torch.randn(3, 4, dtype=torch.complex64)
    n = x.to("neuron")
    assert n.conj_physical_() is n
    assert_close(n.cpu(), x.clone().conj_physical_())


def test_conj_physical_inplace_on_real_is_identity():
    x = torch.randn(5)
    n = x.to("neuron")
    n.conj_physical_()
    assert_close(n.cpu(), x)


def test_complex_svd_with_out_tensors_matches_cpu():
    a = torch.randn(5, 3, dtype=torch.complex64)

    def outs(device):
        return (torch.empty(0, dtype=a.dtype, device=device),
                torch.empty(0, device=device), torch.empty(0, dtype=a.dtype, device=device))

    cpu, neuron = outs("cpu"), outs("neuron")
    torch.linalg.svd(a, out=cpu)
    torch.linalg.svd(a.to("neuron"), out=neuron)
    assert_close([t.cpu() for t in neuron], list(cpu))
