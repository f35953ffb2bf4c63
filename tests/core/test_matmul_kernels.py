"""The native mm/addmm/bmm kernels (csrc/aten/native/Matmul.cpp) against the CPU: the CPU kernel
runs on the neuron tensors directly, so results are bit-identical to the CPU's; operands it cannot
take (other devices, mixed dtypes, float64) go to the fallback, which raises the CPU's errors or
the device's."""

import copy
import warnings

import pytest
import torch

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.complex64, torch.int64]


def make(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    return torch.randint(-5, 5, shape, generator=g, dtype=dtype)


def same(dev_result, cpu_result):
    assert dev_result.device.type == "neuron"
    assert dev_result.shape == cpu_result.shape and dev_result.stride() == cpu_result.stride()
    torch.testing.assert_close(dev_result.cpu(), cpu_result, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mm(dtype):
    a, b = make((7, 5), dtype, 1), make((5, 3), dtype, 2)
    same(a.neuron() @ b.neuron(), a @ b)
    same(a.t().neuron().t() @ b.neuron(), a @ b)                 # transposed storage
    same(a.neuron()[:, ::2] @ b.neuron()[::2], a[:, ::2] @ b[::2])  # strided views
    same(make((0, 5), dtype, 3).neuron() @ b.neuron(), make((0, 5), dtype, 3) @ b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_addmm(dtype):
    bias, a, b = make((3,), dtype, 0), make((7, 5), dtype, 1), make((5, 3), dtype, 2)
    same(torch.addmm(bias.neuron(), a.neuron(), b.neuron()), torch.addmm(bias, a, b))
    full = make((7, 3), dtype, 4)
    kw = {"beta": 2, "alpha": 3} if not dtype.is_floating_point else {"beta": 0.5, "alpha": 2.0}
    same(torch.addmm(full.neuron(), a.neuron(), b.neuron(), **kw), torch.addmm(full, a, b, **kw))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bmm(dtype):
    a, b = make((4, 6, 5), dtype, 1), make((4, 5, 3), dtype, 2)
    same(torch.bmm(a.neuron(), b.neuron()), torch.bmm(a, b))
    same(torch.bmm(a.neuron().transpose(1, 2).contiguous().transpose(1, 2), b.neuron()),
         torch.bmm(a, b))


def test_conjugate_views():
    a, b = make((4, 4), torch.complex64, 1), make((4, 4), torch.complex64, 2)
    same(a.neuron().conj() @ b.neuron(), a.conj() @ b)
    same(a.neuron() @ b.neuron().mH, a @ b.mH)


def test_out_forms():
    a, b, bias = make((6, 4), torch.float32, 1), make((4, 5), torch.float32, 2), torch.randn(5)
    for op, args in ((torch.mm, (a, b)), (torch.addmm, (bias, a, b)),
                     (torch.bmm, (a.expand(2, 6, 4), b.expand(2, 4, 5)))):
        expected = op(*args)
        for out_shape in (expected.shape, (0,), (3,)):
            out = torch.empty(out_shape, device="neuron")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # resizing a non-empty out= warns, as on CPU
                result = op(*[t.neuron() for t in args], out=out)
            assert result is out
            same(out, expected)


def test_linear_training_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    dev_model = copy.deepcopy(model).neuron()
    x = torch.randn(8, 16)
    model(x).square().sum().backward()
    dev_model(x.neuron()).square().sum().backward()
    for p, q in zip(model.parameters(), dev_model.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad)


# Errors: the CPU's where the CPU raises, the device's where devices or the policy are at fault.
def test_shape_mismatch_raises_the_cpu_error():
    a = make((3, 4), torch.float32, 1)
    with pytest.raises(RuntimeError) as cpu_error:
        a @ a
    with pytest.raises(RuntimeError) as dev_error:
        a.neuron() @ a.neuron()
    assert str(dev_error.value) == str(cpu_error.value)


def test_dtype_mismatch_raises_the_cpu_error():
    a, b = make((3, 4), torch.float32, 1), make((4, 2), torch.bfloat16, 2)
    for op, args in ((torch.mm, (a, b)), (torch.addmm, (torch.zeros(2), a, b))):
        with pytest.raises(RuntimeError) as cpu_error:
            op(*args)
        with pytest.raises(RuntimeError) as dev_error:
            op(*[t.neuron() for t in args])
        assert str(dev_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


def test_wrong_rank_raises_the_cpu_error():
    a = make((3, 4), torch.float32, 1)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.mm(a, a[0])
    with pytest.raises(RuntimeError) as dev_error:
        torch.mm(a.neuron(), a[0].neuron())
    assert str(dev_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


def test_device_mixing_raises():
    a = torch.ones(3, 3, device="neuron")
    for other in (torch.ones(3, 3), torch.ones(3, 3, device="neuron:1")):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            a @ other
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            torch.mm(a, a, out=other)


def test_float64_follows_the_device_policy():
    from torchneuron.ops.dtype_policy import float64_policy

    with float64_policy("error"):
        a = torch.ones(3, 3, dtype=torch.float64, device="neuron")
        with pytest.raises(NotImplementedError, match="float64"):
            a @ a
        with pytest.raises(NotImplementedError, match="float64"):
            torch.bmm(a[None], a[None])
