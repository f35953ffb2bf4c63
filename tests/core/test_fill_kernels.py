"""The native fill_/zero_ kernels (csrc/aten/native/Fill.cpp) against the CPU: every dtype, one
element, small and large, dense and strided; the CPU's errors for values a dtype cannot hold."""

import pytest
import torch

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.complex64, torch.int64,
          torch.int32, torch.int8, torch.uint8, torch.bool, torch.float8_e4m3fn, torch.uint16]


def both(shape, dtype, view=lambda t: t):
    cpu = torch.ones(shape, dtype=dtype)
    return view(cpu), view(cpu.to("neuron"))


def same(dev, cpu):
    assert dev.device.type == "neuron"
    def bits(t):  # compared as bytes: NaN-safe, and -0.0 is not 0.0
        return torch.empty(t.numel(), dtype=t.dtype).copy_(t.reshape(-1)).view(torch.uint8)

    assert torch.equal(bits(dev.cpu()), bits(cpu))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (1,), (7, 5), (300, 300)], ids=str)
def test_fill_and_zero(dtype, shape):
    value = True if dtype == torch.bool else 3
    for view in (lambda t: t, lambda t: t.t() if t.dim() == 2 else t,
                 lambda t: t[::2] if t.dim() else t):
        cpu, dev = both(shape, dtype, view)
        same(dev.fill_(value), cpu.fill_(value))
        cpu, dev = both(shape, dtype, view)
        same(dev.zero_(), cpu.zero_())


def test_fill_floating_values():
    for value in (0.1, -2.5e4, float("inf"), float("nan")):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            cpu, dev = both((4, 3), dtype)
            same(dev.fill_(value), cpu.fill_(value))
            cpu, dev = both((1,), dtype)
            same(dev.fill_(value), cpu.fill_(value))
    cpu, dev = both((3,), torch.complex64)
    same(dev.fill_(1 - 2j), cpu.fill_(1 - 2j))


def test_factories_and_overlapping_views():
    same(torch.zeros(5, 3, device="neuron"), torch.zeros(5, 3))
    same(torch.ones(2, 70000, dtype=torch.int16, device="neuron"),
         torch.ones(2, 70000, dtype=torch.int16))
    same(torch.full((4,), 7.5, device="neuron"), torch.full((4,), 7.5))
    same(torch.zeros_like(torch.empty(3, 3, device="neuron").t()),
         torch.zeros_like(torch.empty(3, 3).t()))
    base_cpu, base_dev = torch.ones(4), torch.ones(4, device="neuron")
    base_cpu.expand(3, 4).fill_(2)  # filling overlapping memory is allowed: idempotent
    base_dev.expand(3, 4).fill_(2)
    same(base_dev, base_cpu)
    big_cpu, big_dev = torch.ones(200, 200), torch.ones(200, 200, device="neuron")
    same(big_dev.t().zero_(), big_cpu.t().zero_())


def test_zero_grad_keeps_grads_on_neuron():
    lin = torch.nn.Linear(3, 2).neuron()
    lin(torch.ones(1, 3, device="neuron")).sum().backward()
    torch.optim.SGD(lin.parameters(), lr=0.1).zero_grad(set_to_none=False)
    for p in lin.parameters():
        same(p.grad, torch.zeros(p.shape))


def test_value_out_of_range_raises_the_cpu_error():
    for shape in ((1,), (4,)):
        with pytest.raises(RuntimeError) as cpu_error:
            torch.ones(shape, dtype=torch.int8).fill_(1000)
        with pytest.raises(RuntimeError) as dev_error:
            torch.ones(shape, dtype=torch.int8, device="neuron").fill_(1000)
        assert str(dev_error.value) == str(cpu_error.value)


@pytest.mark.parametrize("dtype,value", [(torch.float32, 1e300), (torch.float32, 1j),
                                         (torch.int64, 2.0 ** 70), (torch.uint8, -1)], ids=str)
def test_one_element_fills_convert_and_refuse_as_the_cpu(dtype, value):
    # A one-element fill is written directly for these dtypes (the CPU's scalar_fill):
    # the conversion, its errors, and a one-element view at an offset are the CPU's.
    for shape in ((), (1,)):
        try:
            expected = torch.zeros(shape, dtype=dtype).fill_(value)
        except RuntimeError as cpu_error:
            with pytest.raises(RuntimeError) as dev_error:
                torch.zeros(shape, dtype=dtype, device="neuron").fill_(value)
            assert str(dev_error.value) == str(cpu_error)
        else:
            same(torch.zeros(shape, dtype=dtype, device="neuron").fill_(value), expected)
    cpu, dev = torch.zeros(5, dtype=dtype), torch.zeros(5, dtype=dtype, device="neuron")
    cpu[3:4].fill_(7), dev[3:4].fill_(7)
    same(dev, cpu)
