"""Copies that are not one memcpy (strided, broadcast, dtype-converting, conj/neg views, across
devices) run the CPU's copy kernel on the two tensors' memory: results equal the CPU's bit for
bit, and overlapping copies raise the CPU's error."""

import pytest
import torch

PAIRS = [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
         (torch.int64, torch.float16), (torch.float32, torch.int32), (torch.bool, torch.float32),
         (torch.complex64, torch.complex64), (torch.uint8, torch.int8)]


def source(dtype):
    g = torch.Generator().manual_seed(0)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(6, 5, generator=g, dtype=dtype) * 50
    if dtype == torch.bool:
        return torch.randint(0, 2, (6, 5), generator=g).bool()
    return torch.randint(-100, 100, (6, 5), generator=g).to(dtype)


@pytest.mark.parametrize("src_dtype,dst_dtype", PAIRS, ids=str)
@pytest.mark.parametrize("route", ["neuron->neuron", "cpu->neuron", "neuron->cpu",
                                   "neuron:0->neuron:1"])
def test_strided_converting_copies(route, src_dtype, dst_dtype):
    src_dev, dst_dev = route.split("->")
    src = source(src_dtype)
    for view in (lambda t: t.t(), lambda t: t[::2, 1:], lambda t: t[0].expand(4, 5)):
        expected = torch.zeros(view(src).shape, dtype=dst_dtype)
        expected.copy_(view(src))
        dst = torch.zeros(view(src).shape, dtype=dst_dtype, device=dst_dev)
        dst.copy_(view(src.to(src_dev)))
        torch.testing.assert_close(dst.cpu(), expected, rtol=0, atol=0)
        # into a strided destination
        expected_t = torch.zeros(expected.shape[::-1], dtype=dst_dtype).t().copy_(view(src))
        dst_t = torch.zeros(expected.shape[::-1], dtype=dst_dtype, device=dst_dev).t()
        dst_t.copy_(view(src.to(src_dev)))
        torch.testing.assert_close(dst_t.cpu(), expected_t, rtol=0, atol=0)


def test_conj_and_neg_views():
    z = torch.randn(4, 3, dtype=torch.complex64)
    dev = z.neuron()
    torch.testing.assert_close(dev.conj().t().contiguous().cpu(), z.conj().t().contiguous())
    out = torch.empty(3, 4, dtype=torch.complex64, device="neuron")
    out.copy_(dev.conj().t())
    torch.testing.assert_close(out.cpu(), z.conj().t())
    torch.testing.assert_close(torch.neg(dev.conj()).resolve_neg().cpu(), torch.neg(z.conj()))


def test_overlapping_copy_raises_the_cpu_error():
    cpu = torch.arange(8.0)
    with pytest.raises(RuntimeError) as cpu_error:
        cpu[1:].copy_(cpu[:-1])
    dev = torch.arange(8.0, device="neuron")
    with pytest.raises(RuntimeError) as dev_error:
        dev[1:].copy_(dev[:-1])
    assert str(dev_error.value) == str(cpu_error.value)
    torch.testing.assert_close(dev.cpu(), torch.arange(8.0))  # nothing written
    with pytest.raises(RuntimeError, match="more than one element"):
        dev.expand(2, 8).copy_(torch.ones(2, 8))


def test_shape_mismatch_raises_the_cpu_error():
    with pytest.raises(RuntimeError) as cpu_error:
        torch.zeros(3).copy_(torch.ones(4))
    with pytest.raises(RuntimeError) as dev_error:
        torch.zeros(3, device="neuron").copy_(torch.ones(4, device="neuron"))
    assert str(dev_error.value) == str(cpu_error.value)


def test_copies_within_the_device_raise_the_cpu_errors():
    # Within one device the CPU's copy kernel runs on the neuron tensors themselves; its iterator
    # must still refuse what the CPU's copy_ refuses, writing nothing.
    dev = torch.arange(8.0, device="neuron")
    with pytest.raises(RuntimeError, match="more than one element") as dev_error:
        dev.expand(2, 8).copy_(torch.ones(2, 8, device="neuron"))
    with pytest.raises(RuntimeError) as cpu_error:
        torch.arange(8.0).expand(2, 8).copy_(torch.ones(2, 8))
    assert str(dev_error.value) == str(cpu_error.value)
    torch.testing.assert_close(dev.cpu(), torch.arange(8.0))
    with pytest.raises(RuntimeError) as cpu_error:
        torch.zeros(2, 3).t().copy_(torch.ones(4, 2))
    with pytest.raises(RuntimeError) as dev_error:
        torch.zeros(2, 3, device="neuron").t().copy_(torch.ones(4, 2, device="neuron"))
    assert str(dev_error.value) == str(cpu_error.value)


def test_complex_to_real_copy_within_the_device_warns_and_keeps_the_real_part():
    z = torch.randn(3, 4, dtype=torch.complex64)
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # the CPU warns once per process; every time here
    try:
        with pytest.warns(UserWarning, match="discards the imaginary part"):
            out = torch.empty(4, 3, device="neuron").t().copy_(z.neuron())
    finally:
        torch.set_warn_always(always)
    torch.testing.assert_close(out.cpu(), z.real)


def test_copy_within_the_device_reads_what_queued_work_wrote():
    # A strided copy that runs at the call (an idle device, or one it cannot queue behind) must
    # first let queued work finish: its source is a matmul's result.
    a = torch.randn(256, 256)
    dev = a.neuron()
    for _ in range(3):
        product = dev @ dev
        out = torch.empty(256, 128, device="neuron")
        out.copy_(product[:, ::2])
        torch.testing.assert_close(out.cpu(), (a @ a)[:, ::2])
