"""Compiled chains against eager CPU: same results (bitwise where Inductor keeps the op order),
written into the caller's buffers, one kernel for a pure pointwise chain."""

from __future__ import annotations

import re

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from torchneuron.fused_eager import compile_chain

from . import chains


@pytest.mark.parametrize("name", sorted(chains.ALL))
def test_compiled_chain_equals_eager_cpu(compiled, name):
    chain, inputs = chains.ALL[name]()
    expected_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    expected = chain.run_eager(expected_inputs)
    got = compiled[name].run(inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.stride() == e.stride()
        torch.testing.assert_close(g, e)
    for g, e in zip(inputs, expected_inputs):  # inputs: only in_place's first one changes
        if isinstance(g, torch.Tensor):
            torch.testing.assert_close(g, e)


@pytest.mark.parametrize("name", ["arithmetic", "promoting", "in_place"])
def test_pointwise_chains_without_float32_transcendentals_are_bitwise_equal(compiled, name):
    # Inductor keeps eager's op order, and rounds float16 intermediates as eager does
    # (emulate_precision_casts), so float16 sigmoid/tanh computed in float32 match too.
    chain, inputs = chains.ALL[name]()
    expected_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    expected = chain.run_eager(expected_inputs)
    got = compiled[name].run(inputs)
    for g, e in zip(got + inputs, expected + expected_inputs):
        assert not isinstance(g, torch.Tensor) or torch.equal(g, e)


def test_results_go_into_the_callers_buffers(compiled):
    chain, inputs = chains.promoting()
    buffers = [spec.empty() for spec in chain.output_specs()]
    pointers = [b.data_ptr() for b in buffers]
    compiled["promoting"](inputs, buffers)
    assert [b.data_ptr() for b in buffers] == pointers
    for b, e in zip(buffers, chain.run_eager(inputs)):
        torch.testing.assert_close(b, e)


def test_in_place_output_updates_the_input(compiled):
    chain, inputs = chains.in_place()
    x, y, _ = inputs
    expected = x * y + 1.0
    pointer = x.data_ptr()
    assert compiled["in_place"].run(inputs) == []
    assert x.data_ptr() == pointer
    torch.testing.assert_close(x, expected)


def test_pure_pointwise_chain_is_one_kernel_that_stores_only_its_output():
    chain, inputs = chains.arithmetic()
    # run_and_get_code sees the generated source on a disk-cache hit too.
    compiled, sources = run_and_get_code(compile_chain, chain)
    source = "\n".join(sources)
    kernels = re.findall(r"^(cpp_fused_\w+) = async_compile", source, re.MULTILINE)
    assert len(kernels) == 1 and source.count('extern "C"') == 1, source
    assert len(re.findall(rf"^\s+{kernels[0]}\(", source, re.MULTILINE)) == 1, source  # one call
    # The four results are kept in registers: one pointer is written, the output buffer.
    assert len(set(re.findall(r"\bout_ptr\d+\b", source))) == 1, source
    (got,) = compiled.run(inputs)
    torch.testing.assert_close(got, chain.run_eager(inputs)[0])


def test_a_result_that_does_not_fit_its_input_is_refused_before_compiling():
    from torchneuron.fused_eager import Chain, InputRef, Output, Step, TensorSpec

    small, row = TensorSpec(torch.float32, (4, 1), (1, 1)), TensorSpec(torch.float32, (5,), (1,))
    chain = Chain((small, row), (Step(torch.ops.aten.add.Tensor, (InputRef(0), InputRef(1))),),
                  (Output(0, into_input=0),))
    with pytest.raises(ValueError, match=r"shape \[4, 5\] and cannot be written into input 0"):
        compile_chain(chain)
