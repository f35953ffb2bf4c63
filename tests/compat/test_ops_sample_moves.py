"""The op battery's copy of a CPU sample on neuron (cases.to_device) is the sample autograd and
the kernels see on the CPU: views made without grad mode get no gradient of their own (unless
given requires_grad themselves), a real
view of a complex base keeps its values, an as_strided view keeps its place in its base, and a
plain tensor stays a leaf that requires grad. A sample that cannot be moved is a failure of that
sample (runner), and the OpInfo's other samples still run."""

import pytest
import torch

from torchneuron.compat.ops import cases, runner
from torchneuron.compat.ops.cases import Unit, to_device


def _no_grad_view(make_view):
    base = torch.randn(10, dtype=torch.complex64).requires_grad_()
    with torch.no_grad():
        return make_view(base)


@pytest.mark.parametrize("make_view", [lambda b: b[:8], lambda b: b.real[:8]],
                         ids=["slice", "real_part_slice"])
def test_a_view_made_without_grad_gets_no_gradient_on_either_side(make_view):
    view = _no_grad_view(make_view)
    (moved,) = to_device((view,), "neuron")
    assert moved.device.type == "neuron" and moved.requires_grad and moved.grad_fn is None
    torch.testing.assert_close(moved.detach().cpu(), view.detach())
    other = torch.randn(8, requires_grad=True)
    moved_other = to_device(other, "neuron")
    cpu = torch.autograd.grad((view * other).sum().real, [view, other], allow_unused=True)
    got = torch.autograd.grad((moved * moved_other).sum().real, [moved, moved_other],
                              allow_unused=True)
    assert cpu[0] is None and got[0] is None
    torch.testing.assert_close(got[1].cpu(), cpu[1])


@pytest.mark.parametrize("base_requires_grad", [True, False])
def test_a_view_given_requires_grad_itself_is_a_leaf_with_a_gradient(base_requires_grad):
    # dot's sample: x.conj().requires_grad_() of an x that requires grad; cholesky_solve's: a
    # view of a base that does not.
    base = torch.randn(8, dtype=torch.complex64).requires_grad_(base_requires_grad)
    with torch.no_grad():
        views = [base.conj().requires_grad_(), base[1:5].requires_grad_()]
    for view in views:
        moved = to_device(view, "neuron")
        assert moved.is_leaf and moved.requires_grad
        cpu = torch.autograd.grad((view * 2).sum().abs(), view)[0]
        got = torch.autograd.grad((moved * 2).sum().abs(), moved)[0]
        torch.testing.assert_close(got.cpu(), cpu)


def test_a_real_view_of_a_complex_base_keeps_its_values():
    # Its strides count float32 elements: placed in a complex copy of the base they read past
    # the end of it (the move raised "setStorage: ... out of bounds").
    base = torch.randn(10, dtype=torch.complex64)
    view = base.real[:8]
    moved = to_device(view, "neuron")
    assert moved.dtype == torch.float32 and not moved.requires_grad
    torch.testing.assert_close(moved.cpu(), view)


def test_an_as_strided_view_keeps_its_place_and_a_leaf_stays_a_leaf():
    base = torch.arange(12.0)
    view = base[2:10:2]
    moved = to_device(view, "neuron")
    assert (moved.stride(), moved.storage_offset()) == (view.stride(), view.storage_offset())
    torch.testing.assert_close(moved.cpu(), view)
    leaf = torch.randn(3, requires_grad=True)
    moved_leaf, again = to_device([leaf, leaf], "neuron")
    assert moved_leaf is again and moved_leaf.is_leaf and moved_leaf.requires_grad


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_a_sparse_leaf_stays_a_leaf():
    # Sparse tensors have no views to read a gradient edge from (aten::view has no sparse kernel).
    for sparse in (torch.randn(3, 3).to_sparse(), torch.randn(3, 3).to_sparse_csr()):
        moved = to_device(sparse.requires_grad_(), "neuron")
        assert moved.layout == sparse.layout and moved.is_leaf and moved.requires_grad
        torch.testing.assert_close(moved.detach().cpu().to_dense(), sparse.detach().to_dense())


def _istft_unit():
    dbs = cases.databases()
    (unit,) = cases.enumerate_units({"op_db": dbs["op_db"]}, ["istft"], ["complex64"])
    return dbs["op_db"][unit.index], unit


def _run(op, unit: Unit) -> list[dict]:
    records = []
    runner.UnitRunner(op, unit, ("forward", "backward")).run(
        0, lambda case: None, lambda case, rec: records.append(rec) if rec else None)
    return records


def test_istft_samples_with_window_views_match_the_cpu():
    op, unit = _istft_unit()
    records = _run(op, unit)
    assert {r["sample"] for r in records} == set(range(10))
    assert [r for r in records if r["status"] != "pass"] == []


def test_a_sample_that_cannot_be_moved_fails_alone(monkeypatch):
    op, unit = _istft_unit()
    moved = []

    def to_device_failing_first(obj, device):
        moved.append(obj)
        if len(moved) == 1:
            raise RuntimeError("cannot copy")
        return to_device(obj, device)

    monkeypatch.setattr(runner, "to_device", to_device_failing_first)
    records = _run(op, unit)
    first = [r for r in records if r["sample"] == 0]
    assert first == [{"case": 0, "sample": 0, "variant": "forward", "status": "error",
                      "type": "RuntimeError",
                      "message": "moving the sample to neuron: cannot copy"}]
    assert {r["sample"] for r in records} == set(range(10))
    assert all(r["status"] == "pass" for r in records if r["sample"] != 0)
