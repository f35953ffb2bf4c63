"""Semantics equal PyTorch's on the CPU: aliasing, layouts, shapes, dtypes, autograd."""

import pytest
import torch

ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64,
              torch.complex128, torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16,
              torch.uint32, torch.uint64]


def test_inplace_through_view_changes_base():
    cpu = torch.randn(4, 6)
    dev = cpu.neuron()
    dev[:, 1:3].mul_(2)
    dev.t()[0].add_(1)
    cpu[:, 1:3].mul_(2)
    cpu.t()[0].add_(1)
    torch.testing.assert_close(dev.cpu(), cpu)


def test_view_shares_storage():
    dev = torch.zeros(3, 4, device="neuron")
    v = dev.view(12)
    assert v.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    v[5] = 7
    assert dev[1, 1].item() == 7


def test_non_contiguous_inputs():
    cpu = torch.randn(5, 7)
    dev = cpu.neuron()
    for f in (lambda x: x.t() @ x, lambda x: x[:, ::2].exp(), lambda x: x.t().contiguous(),
              lambda x: torch.cat([x.t(), x.t()]), lambda x: x.unfold(1, 3, 2).sum(-1)):
        torch.testing.assert_close(f(dev).cpu(), f(cpu))


def test_channels_last_conv_keeps_layout():
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    x = torch.randn(2, 3, 9, 9).to(memory_format=torch.channels_last)
    ref = conv(x)
    out = conv.neuron()(x.neuron())
    assert out.is_contiguous(memory_format=torch.channels_last) == ref.is_contiguous(
        memory_format=torch.channels_last)
    torch.testing.assert_close(out.cpu(), ref)


def test_zero_dim_and_empty():
    z = torch.tensor(2.5)
    torch.testing.assert_close((z.neuron() * 3).cpu(), z * 3)
    assert (z.neuron() * 3).item() == 7.5
    e = torch.empty(0, 4)
    torch.testing.assert_close((e.neuron() + 1).cpu(), e + 1)
    torch.testing.assert_close(e.neuron().sum(0).cpu(), e.sum(0))
    torch.testing.assert_close(torch.empty(0, device="neuron").cpu(), torch.empty(0))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_dtype_round_trips_bit_exactly(dtype):
    cpu = (torch.randn(6, 5) * 100).to(dtype) if dtype.is_floating_point or dtype.is_complex \
        else torch.randint(0, 100, (6, 5)).to(dtype)
    back = cpu.neuron().cpu()
    assert back.dtype == dtype
    assert torch.equal(back.view(torch.uint8), cpu.view(torch.uint8))
    # neuron -> neuron across devices keeps the bits too
    assert torch.equal(cpu.to("neuron:1").to("neuron:0").cpu().view(torch.uint8),
                       cpu.view(torch.uint8))


def test_dtype_conversion_on_copy():
    cpu = torch.randn(10) * 50
    torch.testing.assert_close(cpu.neuron().to(torch.int32).cpu(), cpu.to(torch.int32))
    torch.testing.assert_close(cpu.to("neuron", torch.bfloat16).cpu(), cpu.to(torch.bfloat16))


def test_autograd_matches_cpu():
    torch.manual_seed(2)
    a = torch.randn(4, 5, requires_grad=True)
    b = torch.randn(5, 3, requires_grad=True)

    def f(a, b):
        h = torch.tanh(a @ b).softmax(-1)
        return (h * h.log()).sum() + a.pow(2).mean() + torch.nn.functional.gelu(b).sum()

    f(a, b).backward()
    an = a.detach().neuron().requires_grad_()
    bn = b.detach().neuron().requires_grad_()
    f(an, bn).backward()
    torch.testing.assert_close(an.grad.cpu(), a.grad)
    torch.testing.assert_close(bn.grad.cpu(), b.grad)


def test_out_variant_resizes_neuron_output():
    a = torch.randn(3, 4)
    out = torch.empty(0, device="neuron")
    torch.add(a.neuron(), 1, out=out)
    assert out.shape == (3, 4) and out.is_neuron
    torch.testing.assert_close(out.cpu(), a + 1)


def test_ops_returning_several_tensors_and_lists():
    a = torch.randn(4, 6)
    vals, idx = a.neuron().max(1)
    ref_v, ref_i = a.max(1)
    torch.testing.assert_close(vals.cpu(), ref_v)
    torch.testing.assert_close(idx.cpu(), ref_i)
    for got, ref in zip(a.neuron().split([2, 4], 1), a.split([2, 4], 1)):
        assert got.is_neuron
        torch.testing.assert_close(got.cpu(), ref)


def test_factories_land_on_the_requested_device():
    for t in (torch.arange(5, device="neuron:1"), torch.zeros(3, device="neuron:1"),
              torch.randn(3, device="neuron:1"), torch.full((2,), 3.0, device="neuron:1")):
        assert t.device == torch.device("neuron", 1)
    torch.testing.assert_close(torch.arange(5, device="neuron:1").cpu(), torch.arange(5))
    torch.testing.assert_close(torch.linspace(0, 1, 7, device="neuron").cpu(),
                               torch.linspace(0, 1, 7))


def test_cpu_index_tensor_is_accepted_like_cuda():
    a = torch.randn(5, 3)
    idx = torch.tensor([4, 0, 2])
    torch.testing.assert_close(a.neuron()[idx].cpu(), a[idx])


def test_results_of_kernels_are_neuron_memory():
    before = torch.neuron.memory_allocated()
    a = torch.randn(256, 256, device="neuron")
    b = torch.randn(256, 256, device="neuron")
    y = a @ b  # the CPU kernel's output buffer is adopted, not copied
    assert torch.neuron.memory_allocated() - before == 3 * 256 * 256 * 4
    del y
    torch.neuron.synchronize()  # queued work (NEURON_EAGER_MODE=async) holds memory until it ran
    assert torch.neuron.memory_allocated() - before == 2 * 256 * 256 * 4


def test_copies_fast_and_general_paths():
    a = torch.randn(6, 5)
    n = a.neuron()  # contiguous, same dtype: the memcpy path
    torch.testing.assert_close(n.cpu(), a)
    m = torch.empty(5, 6, device="neuron")
    m.copy_(n.t())  # strided: the CPU kernel's path
    torch.testing.assert_close(m.cpu(), a.t())
    with pytest.raises(RuntimeError, match="single memory location"):
        n.view(-1)[1:].copy_(n.view(-1)[:-1])  # partial overlap is rejected, as on CPU
    torch.testing.assert_close(n.cpu(), a)
    assert torch.tensor(7, device="neuron").item() == 7
    assert torch.tensor(True, device="neuron").item() is True
    assert torch.tensor(1.5, dtype=torch.bfloat16, device="neuron").item() == 1.5
    assert torch.tensor(1 + 2j, device="neuron").item() == 1 + 2j
