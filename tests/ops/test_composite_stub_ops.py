"""Composite kernels that call a DispatchStub with the tensor's own device (csrc/
CompositeStubOps.cpp): on neuron they failed an internal assert ("DispatchStub: missing kernel
for neuron"); now they run the CPU kernel on the neuron memory."""

import pytest
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
def test_mode_out_matches_cpu(dtype):
    x = torch.randint(0, 4, (5, 7)).to(dtype)
    for dim, keepdim in ((1, False), (0, True)):
        values = torch.empty(0, dtype=dtype, device="neuron")
        indices = torch.empty(0, dtype=torch.long, device="neuron")
        result = torch.mode(x.neuron(), dim, keepdim, out=(values, indices))
        expected = torch.mode(x, dim, keepdim)
        assert result.values is values and result.indices is indices
        torch.testing.assert_close(values.cpu(), expected.values)
        torch.testing.assert_close(indices.cpu(), expected.indices)


def test_mode_out_wrong_indices_dtype_raises_the_cpu_error():
    x = torch.ones(3, 4)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.mode(x, 1, out=(torch.empty(0), torch.empty(0)))
    with pytest.raises(RuntimeError) as dev_error:
        torch.mode(x.neuron(), 1, out=(torch.empty(0, device="neuron"),
                                       torch.empty(0, device="neuron")))
    assert str(dev_error.value) == str(cpu_error.value)
