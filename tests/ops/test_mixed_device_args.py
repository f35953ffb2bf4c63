"""A native neuron kernel given a tensor from another device (a CPU weight beside a neuron input,
as a module half moved with `.to("neuron")` leaves it) raises as CUDA does, naming both devices,
instead of reading host memory as device memory. The fallback's ops are covered by
test_out_devices.py; these are the kernels neuron implements itself."""

import pytest
import torch
import torch.nn.functional as F

MISMATCH = r"Expected all tensors to be on the same device.*neuron:0 and cpu"


def _conv_args():
    x = torch.randn(1, 2, 5, 5)
    w = torch.randn(3, 2, 3, 3)
    b = torch.randn(3)
    return x, w, b


@pytest.mark.parametrize("cpu_arg", ["weight", "bias"])
def test_conv2d_with_a_cpu_parameter_raises(cpu_arg):
    x, w, b = _conv_args()
    args = {"weight": w.to("neuron"), "bias": b.to("neuron")}
    args[cpu_arg] = args[cpu_arg].cpu()
    with pytest.raises(RuntimeError, match=MISMATCH):
        F.conv2d(x.to("neuron"), args["weight"], args["bias"])


def test_conv_transpose_with_a_cpu_weight_raises():
    x = torch.randn(1, 3, 4, 4, device="neuron")
    with pytest.raises(RuntimeError, match=MISMATCH):
        F.conv_transpose2d(x, torch.randn(3, 2, 3, 3))


def test_conv2d_on_one_device_matches_the_cpu():
    x, w, b = _conv_args()
    for t in (x, w, b):
        t.requires_grad_(True)
    expected = F.conv2d(x, w, b, padding=1)
    expected.sum().backward()
    xn, wn, bn = (t.detach().to("neuron").requires_grad_(True) for t in (x, w, b))
    got = F.conv2d(xn, wn, bn, padding=1)
    got.sum().backward()
    torch.testing.assert_close(got.cpu(), expected)
    for n, c in ((xn, x), (wn, w), (bn, b)):
        torch.testing.assert_close(n.grad.cpu(), c.grad)


def test_a_module_left_half_on_the_cpu_fails_at_the_call():
    conv = torch.nn.Conv2d(2, 3, 3)
    conv.bias.data = conv.bias.data.to("neuron")  # the weight stays on the CPU
    with pytest.raises(RuntimeError, match=MISMATCH):
        conv(torch.randn(1, 2, 5, 5, device="neuron"))
