"""Sparse tensors under autograd on neuron (issue 47): reductions and products over every sparse
layout (COO, CSR, CSC, BSR, BSC), forward and backward, against the CPU. A CPU kernel that keeps
what only the backward needs when an input requires grad must see requires_grad on its neuron
inputs' CPU aliases (csrc/aten/CpuAlias.h): sparse.mm's "amax"/"amin" backward died with SIGSEGV
when it did not."""

import warnings

import pytest
import torch
from torch.testing import assert_close

pytestmark = pytest.mark.filterwarnings("ignore:Sparse (CSR|invariant|BSR|CSC)")

LAYOUTS = {
    "coo": lambda x: x.to_sparse(),
    "csr": lambda x: x.to_sparse_csr(),
    "csc": lambda x: x.to_sparse_csc(),
    "bsr": lambda x: x.to_sparse_bsr((2, 2)),
    "bsc": lambda x: x.to_sparse_bsc((2, 2)),
}

# f(sparse, dense) -> a tensor. The CPU rejects some (op, layout) pairs; neuron must then raise
# the same exception type, never end the process.
OPS = {
    "sum": lambda a, b: a.sum(),
    "sparse.sum": lambda a, b: torch.sparse.sum(a),
    "sparse.sum.dim": lambda a, b: torch.sparse.sum(a, 0),
    "sum.dim": lambda a, b: torch.sum(a, 1),
    "sparse.mm": lambda a, b: torch.sparse.mm(a, b),
    "sparse.mm.sum": lambda a, b: torch.sparse.mm(a, b, "sum"),
    "sparse.mm.mean": lambda a, b: torch.sparse.mm(a, b, "mean"),
    "sparse.mm.amax": lambda a, b: torch.sparse.mm(a, b, "amax"),
    "sparse.mm.amin": lambda a, b: torch.sparse.mm(a, b, "amin"),
    "sparse.softmax": lambda a, b: torch.sparse.softmax(a, 1),
    "addmm": lambda a, b: torch.addmm(b[:4, :3] * 0, a, b[:, :3]),
    "matmul": lambda a, b: a @ b,
    "to_dense": lambda a, b: a.to_dense() * 2,
    "values": lambda a, b: a.values() * 3,
}


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(4, 6, generator=g)
    dense = dense * (torch.rand(4, 6, generator=g) < 0.5)
    dense[1] = 0  # an empty row: amax/amin rows without entries
    return dense, torch.randn(6, 3, generator=g)


def _dense(t):
    return t.to_dense() if t.layout != torch.strided else t


def _run(layout, op, device, grads_for):
    dense, other = _inputs()
    a = LAYOUTS[layout](dense).to(device).requires_grad_("sparse" in grads_for)
    b = other.to(device).requires_grad_("dense" in grads_for)
    try:
        y = OPS[op](a, b)
        outs = _dense(y)
        inputs = [t for t in (a, b) if t.requires_grad]
        weight = torch.linspace(-1, 1, outs.numel(), device=device).reshape(outs.shape)
        grads = torch.autograd.grad((outs * weight).sum(), inputs, allow_unused=True)
    except Exception as e:  # noqa: BLE001 - the CPU's refusals are compared, not hidden
        return None, e
    return (outs, [None if g is None else _dense(g) for g in grads]), None


@pytest.mark.parametrize("grads_for", [("sparse", "dense"), ("sparse",), ("dense",)],
                         ids=lambda g: "+".join(g))
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sparse_forward_and_backward_match_cpu(layout, op, grads_for):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected, cpu_error = _run(layout, op, "cpu", grads_for)
        got, neuron_error = _run(layout, op, "neuron", grads_for)
    if cpu_error is not None:
        assert type(neuron_error) is type(cpu_error), (cpu_error, neuron_error)
        return
    assert neuron_error is None, neuron_error
    out, grads = got
    assert out.device.type == "neuron"
    assert_close(out.cpu(), expected[0])
    assert len(grads) == len(expected[1])
    for g, e in zip(grads, expected[1]):
        assert (g is None) == (e is None)
        if g is not None:
            assert g.device.type == "neuron"
            assert_close(g.cpu(), e)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_sparse_mm_reduce_backward_after_no_grad_forward_raises_as_on_cpu(reduce):
    # Under no_grad the kernel keeps no argmax (as on the CPU); a graph built outside it still
    # gets one. Both devices must agree on each.
    dense, other = _inputs(1)
    for device in ("cpu", "neuron"):
        a = dense.to_sparse_csr().to(device).requires_grad_()
        with torch.no_grad():
            y = torch.sparse.mm(a, other.to(device), reduce)
        assert not y.requires_grad
        y2 = torch.sparse.mm(a, other.to(device), reduce)
        (g,) = torch.autograd.grad(y2.sum(), a)
        if device == "cpu":
            expected_y, expected_g = y, g.to_dense()
        else:
            assert_close(y.cpu(), expected_y)
            assert_close(g.to_dense().cpu(), expected_g)


def test_a_cpu_kernel_sees_requires_grad_and_grad_mode_of_its_neuron_inputs():
    # The general rule behind the sparse fix: a CPU kernel run on neuron memory sees the metadata
    # the CPU's own kernel would see. A kernel of our own reports what it saw.
    lib = torch.library.Library("neuron_test_issue47", "DEF")
    lib.define("probe(Tensor x) -> Tensor")

    def probe(x):
        return torch.tensor([x.requires_grad, torch.is_grad_enabled()])

    lib.impl("probe", probe, "CPU")
    try:
        for device in ("cpu", "neuron"):
            x = torch.ones(3, device=device, requires_grad=True)
            seen = [torch.ops.neuron_test_issue47.probe(x).tolist(),
                    torch.ops.neuron_test_issue47.probe(x.detach()).tolist()]
            with torch.no_grad():
                seen.append(torch.ops.neuron_test_issue47.probe(x).tolist())
            if device == "cpu":
                expected = seen
            else:
                assert seen == expected
        assert expected[0] == [True, True]
    finally:
        lib._destroy()
