"""rms_norm: the op (fast path and NKI kernels) against Hugging Face's formula on the CPU,
forward and gradients, and its errors."""

import pytest
import torch

from torchneuron.kernels import library as kl
from torchneuron.kernels.library.rms_norm import rms_norm_backward_kernel, rms_norm_kernel

from .compare import check_op

# (shape of x): rows below, at and across the 128-partition tile, a hidden size that is not a
# multiple of anything in particular.
SHAPES = [(5, 32), (128, 64), (2, 97, 80), (1, 130, 33)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_the_reference(mode, shape, dtype):
    x = torch.randn(shape, dtype=dtype)
    w = (1 + 0.1 * torch.randn(shape[-1])).to(dtype)
    check_op(lambda a, b: kl.rms_norm(a, b, 1e-5), lambda a, b: kl.rms_norm_reference(a, b, 1e-5),
             [x, w], differentiable=(0, 1))


def test_bfloat16_input_with_float32_weight_gives_float32_as_hugging_face(mode):
    x, w = torch.randn(3, 40, dtype=torch.bfloat16), torch.randn(40)
    check_op(kl.rms_norm, kl.rms_norm_reference, [x, w], differentiable=(0, 1))


def test_kernels_run_on_cpu_tensors_in_the_simulator():
    """The @nki.jit kernels themselves, called as a kernel author would, on CPU inputs."""
    x, w = torch.randn(200, 48), torch.randn(48)
    out, rstd = rms_norm_kernel(x, w, 1e-6)
    torch.testing.assert_close(out, kl.rms_norm_reference(x, w))
    torch.testing.assert_close(rstd, torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
    g = torch.randn(200, 48)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    kl.rms_norm_reference(xr, wr).backward(g)
    dx, dw = rms_norm_backward_kernel(g, x, w, rstd)
    torch.testing.assert_close(dx, xr.grad)
    torch.testing.assert_close(dw.reshape(48), wr.grad, atol=1e-4, rtol=1e-5)


def test_errors_name_the_op_and_the_argument():
    x = torch.randn(4, 8, device="neuron")
    with pytest.raises(ValueError, match=r"rms_norm: weight has shape \(7,\); expected \(8,\)"):
        kl.rms_norm(x, torch.ones(7, device="neuron"))
    with pytest.raises(TypeError, match=r"rms_norm: x has dtype torch.float16.*float32 or "
                                        "bfloat16"):
        kl.rms_norm(x.half(), torch.ones(8, device="neuron"))
    with pytest.raises(RuntimeError, match=r"rms_norm: weight is on cpu; .*neuron tensors"):
        kl.rms_norm(x, torch.ones(8))
    with pytest.raises(RuntimeError, match=r"rms_norm: x is on cpu"):
        kl.rms_norm(x.cpu(), torch.ones(8))
