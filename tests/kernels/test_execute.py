"""nki.execute: a kernel run on the `neuron` device from NumPy arrays returns the kernel's return
value with its tensors as NumPy arrays, equal to what a CPU reference computes."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import Kernel, NkiValidationError
from torchneuron.kernels.nki.errors import NkiTypeError


@nki.jit
def matmul_kernel(X, y):
    """z = X.T @ y through the Tensor Engine (X given as (K, M), its stationary layout)."""
    X_sbuf = nl.ndarray(shape=X.shape, dtype=X.dtype, buffer=nl.sbuf)
    y_sbuf = nl.ndarray(shape=y.shape, dtype=y.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=X_sbuf, src=X)
    nisa.dma_copy(dst=y_sbuf, src=y)
    z_psum = nl.matmul(X_sbuf, y_sbuf, transpose_x=True)
    z_sbuf = nl.ndarray(shape=z_psum.shape, dtype=X.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(z_sbuf, z_psum)
    z = nl.ndarray(shape=z_sbuf.shape, dtype=X.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=z, src=z_sbuf)
    return z


def add_and_scale(a, b):
    """A plain function (no @nki.jit): returns (a + b, 2 a)."""
    ta, tb = (nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf) for _ in range(2))
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    total = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=ta, data2=tb, op=nl.add)
    twice = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=twice, data=ta, op0=nl.multiply, operand0=2.0)
    outs = []
    for t in (total, twice):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        outs.append(out)
    return tuple(outs)


def test_execute_returns_numpy_equal_to_the_cpu_reference():
    rng = np.random.default_rng(0)
    X = rng.random((64, 32), dtype=np.float32)
    y = rng.random((64, 16), dtype=np.float32)
    z = nki.execute(matmul_kernel, X, y)
    assert isinstance(z, np.ndarray) and z.dtype == np.float32
    torch.testing.assert_close(torch.from_numpy(z), torch.from_numpy(X).T @ torch.from_numpy(y))


def test_execute_takes_a_plain_function_and_keyword_arguments():
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.ones((4, 8), dtype=np.float32)
    total, twice = nki.execute(add_and_scale, a, b=b)
    np.testing.assert_array_equal(total, a + b)
    np.testing.assert_array_equal(twice, a * 2)


def test_execute_runs_on_the_neuron_device():
    """The kernel's arguments are `neuron` tensors while it runs (the software NeuronCore)."""
    seen = []
    original = Kernel.run

    def spy(self, args, kwargs, seat=None):
        seen.extend(a.device.type for a in args if isinstance(a, torch.Tensor))
        return original(self, args, kwargs, seat)

    Kernel.run = spy
    try:
        nki.execute(matmul_kernel, np.ones((8, 4), np.float32), np.ones((8, 2), np.float32))
    finally:
        Kernel.run = original
    assert seen == ["neuron", "neuron"]


def test_execute_refuses_torch_tensors():
    with pytest.raises(NkiTypeError, match=r"nki.execute runs a kernel without a framework and "
                       r"takes NumPy arrays; got a torch tensor of shape \(8, 4\)"):
        nki.execute(matmul_kernel, torch.ones(8, 4), np.ones((8, 2), np.float32))


def test_execute_refuses_a_kernel_that_writes_its_argument_and_leaves_it_untouched():
    @nki.jit
    def in_place(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=7.0)
        nisa.dma_copy(dst=x, src=t)
        return x

    x = np.zeros((4, 4), np.float32)
    with pytest.raises(NkiValidationError, match=r"\[execute-arguments\] nki.execute: kernel "
                       r".*in_place wrote into its argument array of shape \(4, 4\)"):
        nki.execute(in_place, x)
    np.testing.assert_array_equal(x, np.zeros((4, 4), np.float32))


def test_execute_refuses_arrays_that_share_memory():
    base = np.zeros((8, 4), np.float32)
    with pytest.raises(NkiTypeError, match=r"two argument arrays share memory"):
        nki.execute(add_and_scale, base[:4], base[2:6])


def test_execute_refuses_what_is_not_a_kernel():
    with pytest.raises(NkiTypeError, match=r"is not a kernel"):
        nki.execute(42, np.zeros((2, 2), np.float32))
