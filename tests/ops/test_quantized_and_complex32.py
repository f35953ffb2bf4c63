"""Quantized tensors are refused on neuron with a message naming the cause (PyTorch deprecates
its quantized dtypes); complex32 works wherever the CPU's kernels take it."""

import pytest
import torch

QUANTIZED = r"quantized tensors are not supported on neuron \(aten::"


def test_quantize_per_tensor_of_a_neuron_tensor_is_refused_by_name():
    x = torch.randn(4, device="neuron")
    before = x.cpu().clone()
    with pytest.raises(NotImplementedError, match=QUANTIZED):
        torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
    torch.testing.assert_close(x.cpu(), before)  # the input is untouched


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_moving_a_quantized_cpu_tensor_to_neuron_is_refused_by_name():
    q = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
    with pytest.raises(NotImplementedError, match=QUANTIZED + "empty_quantized"):
        q.to("neuron")
    assert q.int_repr().device.type == "cpu"  # the CPU tensor still works


@pytest.mark.parametrize("dtype", [torch.qint8, torch.quint8, torch.qint32])
def test_quantized_factories_on_neuron_are_refused_by_name(dtype):
    with pytest.raises(NotImplementedError, match=QUANTIZED + "empty"):
        torch.empty(3, dtype=dtype, device="neuron")
    with pytest.raises(NotImplementedError, match=QUANTIZED + "_empty_affine_quantized"):
        torch._empty_affine_quantized([3], scale=0.1, zero_point=0, dtype=dtype, device="neuron")


@pytest.mark.filterwarnings("ignore::UserWarning")  # "ComplexHalf support is experimental"
@pytest.mark.parametrize("op", [
    lambda a, b: a + 1, lambda a, b: a * 2, lambda a, b: a - b, lambda a, b: a * b,
    lambda a, b: a + b, lambda a, b: a.conj(), lambda a, b: torch.view_as_real(a),
    lambda a, b: a.to(torch.complex64), lambda a, b: a.clone(), lambda a, b: a[1:],
    lambda a, b: torch.cat([a, b]), lambda a, b: a.reshape(2, 2).t().contiguous(),
], ids=["add_number", "mul_number", "sub", "mul", "add", "conj", "view_as_real", "to_cfloat",
        "clone", "slice", "cat", "transpose"])
def test_complex32_equals_the_cpu(op):
    a = torch.tensor([1 + 2j, -3 + 0.5j, 0.25j, 4], dtype=torch.chalf)
    b = torch.tensor([2 - 1j, 1, -1j, 0.5 + 0.5j], dtype=torch.chalf)
    expected = op(a, b)
    got = op(a.to("neuron"), b.to("neuron"))
    assert got.device.type == "neuron" and got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_complex32_where_the_cpu_has_no_kernel_raises_the_cpus_error():
    a = torch.ones(3, dtype=torch.chalf)
    with pytest.raises(NotImplementedError) as on_cpu:
        a.sum()
    with pytest.raises(NotImplementedError) as on_neuron:
        a.to("neuron").sum()
    assert str(on_neuron.value) == str(on_cpu.value)
