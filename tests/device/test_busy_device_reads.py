"""Ops called while the device is busy are queued whatever their size, and the fallback reads
their arguments for the queue in the one walk that checks them (csrc/aten/CallArguments.h): the
signature, the snapshots the worker runs on, CPU scalars copied at the call. Each case warms its
signature (a first call runs at the call), busies the device, calls again and compares with the
CPU; the arguments are changed after the call to show the worker used what they were at the
call."""

import pytest
import torch
from torchneuron._C import launch as _launch_c

BUSY_NS = 20_000_000


def _inputs(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=g)
    y = torch.randn(4, 6, generator=g)
    return x.to(device), y.to(device)


CASES = {
    "alpha= float": lambda x, y: torch.add(x, y, alpha=0.25),
    "one tensor twice": lambda x, y: x * x,
    "tensor list": lambda x, y: torch.cat([x, y, x], dim=1),
    "tensor list, stack": lambda x, y: torch.stack([y, x]),
    "int list": lambda x, y: x.sum(dim=[0, 1], keepdim=True),
    "CPU scalar tensor": lambda x, y: x * torch.tensor(3.0),
    "python scalar": lambda x, y: torch.where(x > 0, x, 0.5),
    "view of an argument": lambda x, y: torch.mul(x[1:, ::2], y[:-1, 1::2]),
    "optional tensor list (neuron indices)": lambda x, y: x[torch.tensor([0, 3], device=x.device)],
    "optional tensor list (CPU indices)": lambda x, y: x[torch.tensor([0, 3])],
    "in place on a view": lambda x, y: (x[:, 1:3].add_(y[:, :2]), x.clone())[1],
    "out=": lambda x, y: torch.mul(x, y, out=torch.empty_like(x)),
    "no meta function": lambda x, y: torch.nonzero(x > 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_op_on_a_busy_device_computes_what_the_cpu_computes(name):
    if _launch_c.eager_mode() == "sync":
        pytest.skip("only queued modes keep the device busy")
    fn = CASES[name]
    x, y = _inputs("cpu")
    expected = fn(x.clone(), y.clone())
    xn, yn = _inputs("neuron")
    fn(xn.clone(), yn.clone())  # the signature's first call runs at the call
    torch.neuron.synchronize()
    a, b = xn.clone(), yn.clone()
    torch.neuron._sleep(BUSY_NS)
    got = fn(a, b)
    a.fill_(100.0)  # queued after the op: it must have read what the arguments held at the call
    b.zero_()
    torch.testing.assert_close(got.cpu(), expected)


def test_a_busy_device_queues_a_small_op():
    if _launch_c.eager_mode() != "async":
        pytest.skip("async mode queues (fused mode may hold it instead)")
    x, y = _inputs("neuron")
    torch.add(x, y, alpha=2.0)
    torch.neuron.synchronize()
    torch.neuron._sleep(10 * BUSY_NS)
    before = _launch_c.queued_items()
    z = torch.add(x, y, alpha=2.0)
    assert _launch_c.queued_items() == before + 1
    torch.testing.assert_close(z.cpu(), torch.add(x.cpu(), y.cpu(), alpha=2.0))
