"""Runtime scalars (torchneuron/fused_eager/runtime_scalars.py): a float the fused kernel reads at
each call. One compiled chain serves every value, with the results of the value compiled in."""

from __future__ import annotations

import pytest
import torch

from torchneuron.fused_eager import (Chain, InputRef, Output, RuntimeScalar, Scalar, Step,
                                     StepRef, TensorSpec, compile_chain)
from torchneuron.fused_eager.graph import build_graph
from torchneuron.fused_eager.runtime_scalars import RUNTIME_SCALARS, configured_names, tensor_form

aten = torch.ops.aten


def eager(op, *args, **kwargs):
    return op(*args, **kwargs)


def arguments(op, value, dtype):
    """Tensor arguments for `op` (positive where it divides) and the runtime scalar last."""
    torch.manual_seed(0)
    tensors = [torch.randn(64, 33, dtype=dtype) for _ in range(3)]
    tensors[2] = tensors[2].abs() + 0.5
    count = {aten.add.Tensor: 2, aten.sub.Tensor: 2, aten.addcmul.default: 3,
             aten.addcdiv.default: 3, aten.lerp.Scalar: 2}[op]
    return tensors[:count], value


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("value", [0.3, 0.7, -0.6, 1e-3])
@pytest.mark.parametrize("op", sorted(RUNTIME_SCALARS, key=str), ids=str)
def test_each_tensor_form_computes_the_op(op, value, dtype):
    tensors, value = arguments(op, value, dtype)
    expected = op(*tensors, value) if op is aten.lerp.Scalar else \
        op(*tensors, **{RUNTIME_SCALARS[op][0]: value})
    got = tensor_form(op)(eager, *tensors, torch.tensor(value, dtype=torch.float64))
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)


def test_the_table_names_each_argument_as_the_core_does():
    names = dict(configured_names())
    assert names["aten::addcdiv.default"] == "value" and names["aten::add.Tensor"] == "alpha"
    for op, (argument, _) in RUNTIME_SCALARS.items():
        assert argument in [a.name for a in op._schema.arguments], (op, argument)


def adam_like(value_input):
    """param + addcdiv(m, sqrt(v) / c + eps, value=-step) with c a wrapped number and the step
    size at a Scalar-typed argument; both given as `value_input(i, value)`."""
    x, m, v = (TensorSpec(torch.float32, (48, 40), (40, 1)) for _ in range(3))
    inputs = (x, m, v, value_input(0.97), value_input(-1e-3))
    steps = (
        Step(aten.sqrt.default, (InputRef(2),)),
        Step(aten.div.Tensor, (StepRef(0), InputRef(3))),
        Step(aten.add.Tensor, (StepRef(1), 1e-8)),
        Step(aten.addcdiv.default, (InputRef(0), InputRef(1), StepRef(2)), {"value": InputRef(4)}),
    )
    return Chain(inputs, steps, (Output(3, into_input=0),))


def tensors():
    torch.manual_seed(1)
    return [torch.randn(48, 40), torch.randn(48, 40), torch.rand(48, 40)]


def test_one_kernel_serves_every_value_and_matches_the_value_compiled_in():
    runtime = adam_like(RuntimeScalar)
    assert runtime.signature(1) == adam_like(lambda v: RuntimeScalar(v * 2)).signature(1)
    assert runtime.signature(1) != adam_like(Scalar).signature(1)
    kernel = compile_chain(runtime, threads=1)
    for c, step in ((0.97, -1e-3), (0.5, -2e-3), (0.1, 5.0)):
        got = tensors()
        kernel([*got, c, step], [])
        fixed = tensors()
        compile_chain(Chain((*runtime.inputs[:3], Scalar(c), Scalar(step)), runtime.steps,
                            runtime.outputs), threads=1)([*fixed, c, step], [])
        assert torch.equal(got[0], fixed[0]), (c, step)
        expected = tensors()
        expected[0].addcdiv_(expected[1], expected[2].sqrt() / c + 1e-8, value=step)
        torch.testing.assert_close(got[0], expected[0])


@pytest.mark.parametrize("weight", [0.2, 0.5, 0.8])
def test_a_runtime_lerp_weight_picks_the_formula_inductor_picks(weight):
    # lerp.Scalar's decomposition chooses a formula by the weight; the runtime form computes
    # both and selects: bitwise the same as the weight compiled in.
    spec = TensorSpec(torch.float32, (64, 33), (33, 1))

    def chain(w):
        return Chain((spec, spec, w), (Step(aten.lerp.Scalar, (InputRef(0), InputRef(1),
                                                               InputRef(2))),
                                       Step(aten.mul.Tensor, (StepRef(0), 3.0))), (Output(1),))

    torch.manual_seed(2)
    a, b = torch.randn(64, 33), torch.randn(64, 33)
    got = compile_chain(chain(RuntimeScalar(0.3)), threads=1).run([a, b, weight])[0]
    fixed = compile_chain(chain(Scalar(weight)), threads=1).run([a, b, weight])[0]
    assert torch.equal(got, fixed)
    torch.testing.assert_close(got, torch.lerp(a, b, weight) * 3.0)


def test_a_runtime_scalar_where_no_tensor_form_exists_is_refused():
    spec = TensorSpec(torch.float32, (8,), (1,))
    chain = Chain((spec, RuntimeScalar(0.5)),
                  (Step(aten.clamp.default, (InputRef(0), InputRef(1))),
                   Step(aten.neg.default, (StepRef(0),))), (Output(1),))
    with pytest.raises(ValueError, match=r"aten.clamp.default .*runtime_scalars.py"):
        build_graph(chain)


def test_a_runtime_scalar_holds_a_float():
    with pytest.raises(TypeError, match="RuntimeScalar holds a Python float, not int"):
        RuntimeScalar(1)
