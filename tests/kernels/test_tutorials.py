"""The NKI tutorials' kernels on the software NeuronCore, each against its reference result
computed on the CPU (the tutorials' own numpy/PyTorch references)."""

import math

import numpy as np
import pytest
import torch

from tests.kernels import tutorial_kernels as tk


def neuron(*tensors):
    return [t.to("neuron") for t in tensors]


def test_tensor_add_language_guide():
    a, b = torch.randn(128, 512, dtype=torch.float16), torch.randn(128, 512, dtype=torch.float16)
    out = tk.tensor_add(*neuron(a, b))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), a + b)


def test_tensor_add_with_numpy_as_the_tutorial_calls_it():
    a = np.random.rand(128, 512).astype(np.float16)
    b = np.random.rand(128, 512).astype(np.float16)
    out = tk.tensor_add(a, b)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, a + b, atol=1e-4, rtol=1e-2)


def test_spmd_tensor_add_over_a_2d_grid():
    a, b = torch.randn(256, 1024), torch.randn(256, 1024)
    out = tk.spmd_tensor_add[2, 2](*neuron(a, b))
    torch.testing.assert_close(out.cpu(), a + b)


def test_matmul_basic():
    lhsT, rhs = torch.randn(128, 64), torch.randn(128, 512)
    torch.testing.assert_close(tk.matmul_basic(*neuron(lhsT, rhs)).cpu(), lhsT.T @ rhs,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_tiled(dtype):
    lhsT, rhs = torch.randn(256, 256, dtype=dtype), torch.randn(256, 1024, dtype=dtype)
    expected = (lhsT.float().T @ rhs.float()).to(dtype)
    torch.testing.assert_close(tk.matmul_tiled(*neuron(lhsT, rhs)).cpu(), expected,
                               rtol=1e-2 if dtype == torch.bfloat16 else 1e-4, atol=1e-3)


def test_matmul_blocked():
    lhsT, rhs = torch.randn(256, 256), torch.randn(256, 1024)
    torch.testing.assert_close(tk.matmul_blocked(*neuron(lhsT, rhs)).cpu(), lhsT.T @ rhs,
                               rtol=1e-4, atol=1e-3)


def test_transpose2d_tutorial_shape():
    P, X, Y = 5, 3, 4
    a = np.arange(P * X * Y, dtype=np.int8).reshape((P, X * Y))
    out = tk.transpose_rows(a, (X, Y))
    np.testing.assert_array_equal(out, np.transpose(a.reshape(P, X, Y), (0, 2, 1)).reshape(P, X * Y))


def test_transpose_matrix_on_the_tensor_engine():
    x = torch.randn(256, 384, dtype=torch.bfloat16)
    torch.testing.assert_close(tk.transpose_matrix(*neuron(x)).cpu(), x.T.contiguous())


@pytest.mark.parametrize("kernel", [tk.softmax_language, tk.softmax_isa])
def test_softmax_with_a_partial_last_tile(kernel):
    x = torch.randn(200, 384)
    torch.testing.assert_close(kernel(*neuron(x)).cpu(), torch.softmax(x, dim=1))


@pytest.mark.parametrize("kernel", [tk.layernorm_language, tk.layernorm_isa])
def test_layernorm(kernel):
    x, gamma, beta = torch.randn(160, 640), torch.randn(640), torch.randn(640)
    expected = torch.nn.functional.layer_norm(x, (640,), gamma, beta, eps=1e-5)
    out = kernel(*neuron(x), 1e-5, *neuron(gamma, beta))
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm(dtype):
    a, g = torch.randn(250, 512, dtype=dtype), torch.rand(512, dtype=dtype)
    af = a.float()
    expected = (af / torch.sqrt((af * af).mean(dim=1, keepdim=True) + 1e-6) * g.float()).to(dtype)
    out = tk.rmsnorm(*neuron(a, g))
    torch.testing.assert_close(out.cpu(), expected)


@pytest.mark.parametrize("causal", [False, True])
def test_fused_attention(causal):
    d, s = 128, 384
    q, k, v = torch.randn(d, s), torch.randn(d, s), torch.randn(d, s)
    scores = (q.T @ k) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    expected = torch.softmax(scores, dim=1) @ v.T
    out = tk.attention(*neuron(q, k, v), causal=causal)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)
