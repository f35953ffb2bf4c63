"""Lazily conjugated / negated tensors (conj and neg bits) copied across the device boundary.
Before csrc/aten/native/MathBitCopies.cpp, `x.conj().cpu()` on neuron recursed until the stack
overflowed."""

import torch
from torch.testing import assert_close


def _complex(n=5):
    return torch.randn(n, dtype=torch.complex64)


def test_conj_view_to_cpu():
    x = _complex()
    y = x.to("neuron").conj()
    assert y.is_conj()
    assert_close(y.cpu(), x.conj())


def test_conj_view_clone_and_resolve_on_neuron():
    x = _complex()
    y = x.to("neuron").conj()
    assert_close(y.clone().cpu(), x.conj().clone())
    assert_close(y.resolve_conj().cpu(), x.conj().resolve_conj())


def test_cpu_conj_view_to_neuron():
    x = _complex()
    assert_close(x.conj().to("neuron").cpu(), x.conj())


def test_copy_into_conj_view_on_neuron():
    x, src = _complex(), _complex()
    n = x.to("neuron")
    n.conj().copy_(src.to("neuron"))
    x.conj().copy_(src)
    assert_close(n.cpu(), x)


def test_neg_view_to_cpu():
    x = _complex()
    # conj of an imaginary view carries the neg bit.
    y = x.to("neuron").conj().imag
    assert y.is_neg()
    assert_close(y.cpu(), x.conj().imag)


def test_complex_mul_backward_matches_cpu():
    # The backward of a complex product multiplies by conj(other): the original crash.
    a, b = _complex(), _complex()
    g = _complex()
    grads = {}
    for device in ("cpu", "neuron"):
        ad, bd = (t.to(device).requires_grad_() for t in (a, b))
        grads[device] = torch.autograd.grad(ad * bd, (ad, bd), g.to(device))
    assert_close([t.cpu() for t in grads["neuron"]], list(grads["cpu"]))


def test_out_kernel_that_returns_a_conjugate_view():
    # linalg_lu_solve(left=False) on the CPU leaves its out= tensor as a conjugate view of the
    # buffer it wrote; the neuron out= tensor must carry the same bit, or it reads conjugated.
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 3, dtype=torch.complex64, generator=g)
    b = torch.randn(4, 3, dtype=torch.complex64, generator=g)
    lu, pivots = torch.linalg.lu_factor(a)
    cpu_out = torch.empty(0, dtype=torch.complex64)
    torch.linalg.lu_solve(lu, pivots, b, left=False, out=cpu_out)
    out = torch.empty(0, dtype=torch.complex64, device="neuron")
    torch.linalg.lu_solve(lu.neuron(), pivots.neuron(), b.neuron(), left=False, out=out)
    assert out.is_conj() == cpu_out.is_conj()
    torch.testing.assert_close(out.cpu(), cpu_out)
