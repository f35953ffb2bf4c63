"""Fused eager has one rule for what may fuse (csrc/fused_eager/FusibleOps.h): the queue applies
it to every op it may hold, and the Python side (torchneuron.fused_eager.is_fusible) asks the
same rule, so the two cannot disagree. These tests show the queue holding exactly what Python
calls fusible, and the rule's errors."""

from __future__ import annotations

import pytest
import torch

from torchneuron._C import fused_eager as _fused_eager_c
from torchneuron.fused_eager import is_fusible, is_pointwise, is_reduction
from torchneuron.ops.op_lists import CHAIN_ENDING_REDUCTIONS

aten = torch.ops.aten


def test_the_reductions_come_from_the_op_lists():
    for name in CHAIN_ENDING_REDUCTIONS:
        assert _fused_eager_c.step_kind(name) == "reduction", name
    assert is_reduction(aten.sum.default) and is_reduction(aten.prod.dim_int)
    assert not is_reduction(aten.var.dim) and not is_fusible(aten.var.dim)


def test_a_default_overload_is_named_either_way():
    assert _fused_eager_c.step_kind("aten::exp") == _fused_eager_c.step_kind(
        "aten::exp.default") == "pointwise"
    assert is_pointwise(aten.exp.default)


def test_in_place_and_out_forms_are_no_step_of_their_own():
    # The queue holds add_ and add.out as add written back; as a step of a chain only the
    # functional op is one.
    assert _fused_eager_c.step_kind("aten::add_.Tensor") == ""
    assert _fused_eager_c.step_kind("aten::add.out") == ""
    assert _fused_eager_c.step_kind("aten::add.Tensor") == "pointwise"


@pytest.mark.parametrize("name, message", [
    ("add", "is not an op's name"),
    ("aten::no_such_op.Tensor", "no op named 'aten::no_such_op.Tensor'"),
])
def test_the_rule_names_a_bad_op_name(name, message):
    with pytest.raises(RuntimeError, match=message):
        _fused_eager_c.step_kind(name)


def test_the_queue_holds_what_python_calls_fusible(python):
    # Each op twice (a signature's first call runs at the call), then what the queue held of the
    # second call (tensors above the size the launch decision runs at the call on an idle device):
    # an op is held exactly when the rule calls it (or its functional op) fusible.
    code = """
import torch, torchneuron
from torchneuron._C import fused_eager as _fused_eager_c
from torchneuron.fused_eager import is_fusible
aten = torch.ops.aten
x = torch.rand(256, 256, device='neuron') + 0.5
y = torch.rand(256, 256, device='neuron') + 0.5
p = torch.rand(256, 256, device='neuron')
cases = [
    (aten.mul.Tensor, lambda: x * y), (aten.exp.default, lambda: x.exp()),
    (aten.sum.default, lambda: x.sum()), (aten.amax.default, lambda: x.amax()),
    (aten.mm.default, lambda: x @ y), (aten.var.default, lambda: x.var()),
    (aten.add.Tensor, lambda: x.clone().add_(y)), (aten.sort.default, lambda: x.sort()),
    (aten.bernoulli.p, lambda: torch.bernoulli(p)),
]
for op, call in cases:
    call(); torch.neuron.synchronize()
    before = _fused_eager_c.stats()['ops_held']
    result = call(); torch.neuron.synchronize()
    held = _fused_eager_c.stats()['ops_held'] - before > 0
    print(op, is_fusible(op), held)
"""
    out = python(code, {"NEURON_EAGER_MODE": "fused", "NEURON_LAUNCH_BLOCKING": None},
                 timeout=300)
    lines = [line.split() for line in out.stdout.splitlines()]
    assert len(lines) == 9, out.stdout + out.stderr
    for op, fusible, held in lines:
        assert fusible == held, f"{op}: python says fusible={fusible}, the queue held={held}"
    assert {op for op, fusible, _ in lines if fusible == "True"} == {
        "aten.mul.Tensor", "aten.exp.default", "aten.sum.default", "aten.amax.default",
        "aten.add.Tensor"}, out.stdout
