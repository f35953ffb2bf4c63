"""swiglu_mlp: the Llama MLP against transformers' formula on the CPU, forward and gradients of
the input and all three weights, and its errors."""

import pytest
import torch

from torchneuron.kernels import library as kl
from torchneuron.kernels.library.matmul import matmul_kernel
from torchneuron.kernels.library.swiglu import swiglu_forward_kernel

from .compare import check_op

# (x shape, intermediate): rows across a 128-row tile, an intermediate size past one 512-column
# PSUM tile, a hidden size past one 128-row contraction tile.
SHAPES = [((3, 16), 24), ((2, 70, 48), 40), ((130, 136), 520)]


def _inputs(x_shape, inter, dtype):
    hidden = x_shape[-1]
    return [torch.randn(x_shape).to(dtype), (torch.randn(inter, hidden) / hidden**0.5).to(dtype),
            (torch.randn(inter, hidden) / hidden**0.5).to(dtype),
            (torch.randn(hidden, inter) / inter**0.5).to(dtype)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("x_shape, inter", SHAPES)
def test_matches_the_reference(mode, x_shape, inter, dtype):
    check_op(kl.swiglu_mlp, kl.swiglu_mlp_reference, _inputs(x_shape, inter, dtype),
             differentiable=(0, 1, 2, 3))


@pytest.mark.parametrize("a_t, b_t", [(False, False), (True, False), (False, True)])
def test_shared_matmul_kernel_layouts(a_t, b_t):
    a, b = torch.randn(140, 200), torch.randn(200, 530)
    out = matmul_kernel(a.T.contiguous() if a_t else a, b.T.contiguous() if b_t else b,
                        a_transposed=a_t, b_transposed=b_t)
    torch.testing.assert_close(out, a @ b, atol=1e-4, rtol=1e-5)


def test_forward_kernel_in_the_simulator_on_cpu_tensors():
    x, wg, wu, wd = _inputs((20, 32), 48, torch.float32)
    out, gate, up = swiglu_forward_kernel(x, wg, wu, wd)
    torch.testing.assert_close(out, kl.swiglu_mlp_reference(x, wg, wu, wd))
    torch.testing.assert_close(gate, x @ wg.T)
    torch.testing.assert_close(up, x @ wu.T)


def test_errors():
    x, wg, wu, wd = (t.to("neuron") for t in _inputs((4, 16), 24, torch.float32))
    with pytest.raises(ValueError, match=r"expected w_gate and w_up \(intermediate, 16\)"):
        kl.swiglu_mlp(x, wg, wu, wd.T)
    with pytest.raises(ValueError, match="must share one dtype"):
        kl.swiglu_mlp(x.bfloat16(), wg, wu, wd)
    with pytest.raises(TypeError, match="swiglu_mlp: w_up has dtype torch.float64"):
        kl.swiglu_mlp(x, wg, wu.cpu().double(), wd)
    with pytest.raises(RuntimeError, match="swiglu_mlp: w_down is on cpu"):
        kl.swiglu_mlp(x, wg, wu, wd.cpu())
