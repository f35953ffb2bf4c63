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
    if module is torch.backends.cudnn:
        # Through cudnn.flags(), the one way that also works once PyTorch's own test utilities
        # have frozen cudnn's global flags (their import calls disable_global_flags()); flags()
        # resets every flag it is not given, so each is given its current value.
        cudnn = torch.backends.cudnn
        current = {"enabled": cudnn.enabled, "benchmark": cudnn.benchmark,
                   "deterministic": cudnn.deterministic, "allow_tf32": cudnn.allow_tf32,
                   "fp32_precision": cudnn.fp32_precision, name: value}
        with cudnn.flags(**current):
            yield module, name, value
        return
    before = getattr(module, name)
    setattr(module, name, value)
    yield module, name, value
    setattr(module, name, before)


def test_flags_are_flipped_even_when_frozen():
    # The state the whole suite runs in once torch.testing._internal.common_utils is imported.
    from torch.testing._internal import common_utils  # noqa: F401

    assert torch.backends.flags_frozen()


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
