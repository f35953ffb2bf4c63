"""torch.backends.cudnn.* and torch.backends.cuda.* switches a CUDA program sets (and
`torchneuron port` leaves in place, TNP301-306) change nothing on neuron: a convolution, an
LSTM and a matmul give the CPU's results with every switch flipped, and the switches are not
touched by neuron ops."""

import pytest
import torch
import torch.nn as nn

SWITCHES = {
    "cudnn.benchmark": (torch.backends.cudnn, "benchmark", True),
    "cudnn.deterministic": (torch.backends.cudnn, "deterministic", True),
    "cudnn.allow_tf32": (torch.backends.cudnn, "allow_tf32", False),
    "cudnn.enabled": (torch.backends.cudnn, "enabled", False),
    "cuda.matmul.allow_tf32": (torch.backends.cuda.matmul, "allow_tf32", True),
}


@pytest.fixture
def flipped(request):
    module, name, value = SWITCHES[request.param]
    before = getattr(module, name)
    setattr(module, name, value)
    yield module, name, value
    setattr(module, name, before)


def _run(device):
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3).to(device)
    lstm = nn.LSTM(5, 6).to(device)
    x = torch.randn(2, 3, 8, 8).to(device).requires_grad_()
    s = torch.randn(4, 2, 5).to(device)
    m = torch.randn(16, 16).to(device)
    y = conv(x)
    y.sum().backward()
    return [y.detach(), x.grad, lstm(s)[0].detach(), m @ m]


@pytest.mark.parametrize("flipped", list(SWITCHES), indirect=True)
def test_switches_change_nothing_on_neuron(flipped):
    module, name, value = flipped
    cpu = _run("cpu")
    neuron = _run("neuron")
    for a, b in zip(neuron, cpu):
        torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)
    assert getattr(module, name) == value  # no neuron op reset it
