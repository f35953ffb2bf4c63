"""nn.DataParallel and nn.parallel.data_parallel over neuron devices (torchneuron/device/comm.py):
scatter, replicate, parallel_apply and gather as on CUDA, compared with the model run once on
the CPU. Chunks of a batch run through other matrix-multiply blockings than the whole batch, so
the comparison uses PyTorch's float32 tolerances; a one-device call is bit-equal."""

import warnings

import pytest
import torch
import torch.nn as nn
from torch.nn.parallel import comm

pytestmark = pytest.mark.skipif(torch.neuron.device_count() < 2,
                                reason="needs two neuron devices")


class TwoHeads(nn.Module):
    """Tuple output and a keyword argument: both go through scatter and gather."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16))
        self.head_a = nn.Linear(16, 3)
        self.head_b = nn.Linear(16, 1)

    def forward(self, x, scale=1.0):
        h = self.body(x) * scale
        return self.head_a(h), self.head_b(h).squeeze(-1)


def _cpu_reference(model, x, scale):
    a, b = model(x, scale=scale)
    (a.square().sum() + b.sum()).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return (a.detach(), b.detach()), grads


def _run(wrapped, x, scale):
    a, b = wrapped(x, scale=scale)
    (a.square().sum() + b.sum()).backward()
    return a, b


def test_data_parallel_over_every_device_equals_the_cpu():
    torch.manual_seed(0)
    model = TwoHeads()
    x = torch.randn(4 * torch.neuron.device_count() + 3, 8)  # uneven chunks
    (ref_a, ref_b), ref_grads = _cpu_reference(model, x, 0.5)
    model.to("neuron")
    dp = nn.DataParallel(model)
    assert dp.device_ids == list(range(torch.neuron.device_count()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "not compiled with NCCL" on the way back
        a, b = _run(dp, x.to("neuron"), 0.5)
    assert a.device == b.device == torch.device("neuron", 0)
    torch.testing.assert_close(a.detach().cpu(), ref_a)
    torch.testing.assert_close(b.detach().cpu(), ref_b)
    for p, g in zip(model.parameters(), ref_grads):
        assert p.grad.device == torch.device("neuron", 0)
        torch.testing.assert_close(p.grad.cpu(), g)


def test_one_device_is_a_plain_call_bit_for_bit():
    torch.manual_seed(1)
    model = TwoHeads()
    x = torch.randn(6, 8)
    (ref_a, ref_b), ref_grads = _cpu_reference(model, x, 2.0)
    model.to("neuron")
    a, b = _run(nn.DataParallel(model, device_ids=[0]), x.to("neuron"), 2.0)
    torch.testing.assert_close(a.detach().cpu(), ref_a, rtol=0, atol=0)
    torch.testing.assert_close(b.detach().cpu(), ref_b, rtol=0, atol=0)
    for p, g in zip(model.parameters(), ref_grads):
        torch.testing.assert_close(p.grad.cpu(), g, rtol=0, atol=0)


def test_functional_data_parallel_gathers_on_the_output_device():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh())
    x = torch.randn(9, 5)
    ref = model(x)
    model.to("neuron")
    out = nn.parallel.data_parallel(model, x.to("neuron"), device_ids=[0, 1], output_device=1)
    assert out.device == torch.device("neuron", 1)
    torch.testing.assert_close(out.detach().cpu(), ref)
    out.sum().backward()
    model_cpu = model.to("cpu")
    assert all(p.grad is not None for p in model_cpu.parameters())


def test_inputs_on_the_cpu_are_scattered_to_the_devices():
    """DataParallel takes a CPU batch too (Scatter copies it in on side streams)."""
    torch.manual_seed(3)
    model = nn.Linear(4, 2)
    x = torch.randn(8, 4)
    ref = model(x)
    model.to("neuron")
    out = nn.DataParallel(model, device_ids=[0, 1])(x)
    assert out.device == torch.device("neuron", 0)
    torch.testing.assert_close(out.detach().cpu(), ref)


def test_comm_functions_match_their_cpu_meaning():
    t = torch.arange(10.0).reshape(5, 2)
    n = t.to("neuron")
    parts = comm.scatter(n, devices=[0, 1], chunk_sizes=[2, 3])
    assert [p.device.index for p in parts] == [0, 1]
    torch.testing.assert_close(parts[1].cpu(), t[2:])
    back = comm.gather(parts, dim=0, destination="cpu")
    assert back.device.type == "cpu"
    torch.testing.assert_close(back, t)
    copies = comm.broadcast(n, devices=[0, 1])
    assert copies[0] is n and copies[1].device.index == 1  # the source keeps its own tensor
    torch.testing.assert_close(copies[1].cpu(), t)
    total = comm.reduce_add([copies[0], copies[1]], destination=1)
    assert total.device.index == 1
    torch.testing.assert_close(total.cpu(), 2 * t)


def test_bad_arguments_are_clear_errors():
    n = torch.ones(4, 2, device="neuron:1")
    with pytest.raises(RuntimeError, match="all tensors must be on devices\\[0\\]"):
        comm.broadcast_coalesced([n], devices=[0, 1])
    with pytest.raises(RuntimeError, match="do not sum to the tensor's size 4"):
        comm.scatter(n, devices=[0, 1], chunk_sizes=[1, 2])
    with pytest.raises(RuntimeError, match="2 chunk sizes for 1 devices"):
        comm.scatter(n, devices=[0], chunk_sizes=[2, 2])
    with pytest.raises(RuntimeError, match="destination neuron:0 holds none of the inputs"):
        comm.reduce_add([n, n.to("neuron:2")], destination=0)
