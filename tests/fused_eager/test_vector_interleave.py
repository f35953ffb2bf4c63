"""A fused chain's kernel steps by four SIMD vectors (vector_interleave.py); a user's
torch.compile keeps Inductor's own step; results equal eager's, tails included."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch._inductor.utils import run_and_get_code

from torchneuron.fused_eager import (Chain, InputRef, Output, Step, StepRef, TensorSpec,
                                     compile_chain)
from torchneuron.fused_eager.vector_interleave import (VECTORS_PER_STEP, fused_cache_tag,
                                                  fused_tiling, widened)

aten = torch.ops.aten
WIDE = f"VectorizedN<float,{VECTORS_PER_STEP}>"


def _math_chain(shape):
    """The benchmark's transcendental functions one after another on one input."""
    x = torch.randn(shape)
    steps = [Step(aten.mul.Tensor, (InputRef(0), 0.5)), Step(aten.sin.default, (StepRef(0),))]
    for op in (aten.exp.default, aten.tanh.default, aten.sigmoid.default, aten.cos.default):
        steps.append(Step(op, (StepRef(len(steps) - 1),)))
    steps.append(Step(aten.add.Tensor, (StepRef(len(steps) - 1), 1.0)))
    steps.append(Step(aten.log.default, (StepRef(len(steps) - 1),)))
    chain = Chain((TensorSpec.of(x),), tuple(steps), (Output(len(steps) - 1),))
    return chain, [x]


def _compiled_source(chain):
    compiled, sources = run_and_get_code(compile_chain, chain, 1)
    return compiled, "\n".join(sources)


def test_a_fused_chain_steps_by_four_vectors_and_equals_eager_with_a_tail():
    # 1000 elements: 31 steps of 32 floats (AVX2) and a tail of 8, which Inductor's tail loop
    # covers; without the wider step the kernel holds Vectorized<float> only.
    chain, inputs = _math_chain((1000,))
    compiled, source = _compiled_source(chain)
    assert WIDE in source, source
    (got,) = compiled.run(inputs)
    torch.testing.assert_close(got, chain.run_eager(inputs)[0])


def test_a_reduction_ending_a_chain_accumulates_in_four_vectors():
    x = torch.randn(37, 300)
    chain = Chain((TensorSpec.of(x),), (
        Step(aten.mul.Tensor, (InputRef(0), InputRef(0))),
        Step(aten.exp.default, (StepRef(0),)),
        Step(aten.sum.dim_IntList, (StepRef(1), [1])),
    ), (Output(2),))
    compiled, source = _compiled_source(chain)
    assert WIDE in source, source
    (got,) = compiled.run([x])
    torch.testing.assert_close(got, chain.run_eager([x])[0])


def test_a_loop_shorter_than_the_wide_step_keeps_inductors_step():
    # Rows of 16 out of 32: the loops cannot be flattened into one, and the tiled (inner) loop is
    # 16 long (two AVX2 vectors of 8).
    x = torch.randn(64, 32)[:, :16]
    chain = Chain((TensorSpec.of(x),), (
        Step(aten.exp.default, (InputRef(0),)),
        Step(aten.mul.Tensor, (StepRef(0), 2.0)),
    ), (Output(1),))
    compiled, source = _compiled_source(chain)
    assert WIDE not in source and "Vectorized<float>::loadu" in source, source
    (got,) = compiled.run([x])
    torch.testing.assert_close(got, chain.run_eager([x])[0])


def test_a_users_torch_compile_keeps_inductors_step():
    chain, _ = _math_chain((1000,))
    compile_chain(chain, 1)  # the wrapper is installed

    def f(x):
        return torch.log(torch.cos(torch.sigmoid(torch.tanh(torch.exp(torch.sin(x * 0.5))))) + 1)

    x = torch.randn(1000)
    torch._dynamo.reset()
    got, sources = run_and_get_code(torch.compile(f), x)
    assert WIDE not in "\n".join(sources)
    torch.testing.assert_close(got, f(x))


def test_the_cache_tag_separates_fused_kernels_and_keeps_the_users_tag():
    with torch.compiler.config.patch(cache_key_tag="mine"):
        tag = fused_cache_tag()
        assert tag.startswith("mine") and tag != "mine"
        with fused_tiling():
            assert torch.compiler.config.cache_key_tag == tag
        assert torch.compiler.config.cache_key_tag == "mine"


def test_widened_factors():
    wide = VECTORS_PER_STEP * 8
    assert widened([8], [0], [1 << 20], 8) == [wide]
    assert widened([16], [1], [4, 1000], 8) == [wide]  # a low-precision vector of two
    assert widened([8], [1], [4, sympy.Integer(wide)], 8) == [wide]
    assert widened([8], [1], [4, wide - 1], 8) == [8]  # shorter than the wide step
    assert widened([8], [0], [sympy.Symbol("s0")], 8) == [8]  # a size not known
    assert widened([8, 8], [0, 1], [64, 64], 8) == [8, 8]  # 2-D tiling (transposes) kept
    assert widened([], [], [100], 8) == []


def _dtype_chains():
    f64 = torch.randn(1000, dtype=torch.float64)
    i64, f32 = torch.randint(-5, 5, (1000,)), torch.randn(1000)
    bf16 = torch.randn(1000, dtype=torch.bfloat16)
    u8 = torch.randint(0, 255, (1000,), dtype=torch.uint8)
    return {
        "float64 ending in a sum": ([f64], [
            Step(aten.exp.default, (InputRef(0),)), Step(aten.mul.Tensor, (StepRef(0), 2.0)),
            Step(aten.sum.default, (StepRef(1),))], (Output(1), Output(2))),
        "int64 mask and where": ([i64, f32], [
            Step(aten.gt.Scalar, (InputRef(0), 0)),
            Step(aten.where.self, (StepRef(0), InputRef(1), InputRef(0))),
            Step(aten.mul.Tensor, (StepRef(1), InputRef(0))),
            Step(aten.tanh.default, (StepRef(2),))], (Output(3),)),
        "bfloat16 ending in a sum": ([bf16], [
            Step(aten.exp.default, (InputRef(0),)), Step(aten.mul.Tensor, (StepRef(0), InputRef(0))),
            Step(aten.sum.dim_IntList, (StepRef(1), [0]))], (Output(1), Output(2))),
        "uint8 times float32 ending in amax": ([u8, f32], [
            Step(aten.mul.Tensor, (InputRef(0), InputRef(1))),
            Step(aten.amax.default, (StepRef(0),))], (Output(1),)),
    }


@pytest.mark.parametrize("name", sorted(_dtype_chains()))
def test_wide_steps_over_other_dtypes_equal_eager(name):
    # Every dtype is stepped by as many elements as four float vectors (float64 and int64: eight
    # vectors of their own), with a tail of 1000 % 32.
    inputs, steps, outputs = _dtype_chains()[name]
    chain = Chain(tuple(TensorSpec.of(x) for x in inputs), tuple(steps), outputs)
    compiled, source = _compiled_source(chain)
    assert "VectorizedN<" in source, source
    got = compiled.run(list(inputs))
    for g, e in zip(got, chain.run_eager(list(inputs))):
        torch.testing.assert_close(g, e)
