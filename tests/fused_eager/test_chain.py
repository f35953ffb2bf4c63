"""Chain descriptions: what is fusible (PyTorch's pointwise tag, one reduction at the end), the
errors that name what cannot be fused, and the signature that keys the compile cache."""

from __future__ import annotations

import pytest
import torch

from torchneuron.fused_eager import (Chain, InputRef, Output, Scalar, Step, StepRef, TensorSpec,
                                     UnfusibleOpError, is_fusible, is_pointwise, is_reduction)

from . import chains

aten = torch.ops.aten
F32 = TensorSpec(torch.float32, (8, 4), (4, 1))


def _one_step(op, *args, outputs=(Output(0),), inputs=(F32, F32)):
    return Chain(inputs, (Step(op, args),), outputs)


def test_fusibility_comes_from_the_pointwise_tag():
    assert is_pointwise(aten.mul.Tensor) and is_pointwise(aten.where.self)
    assert is_pointwise(aten.gelu.default)
    assert not is_pointwise(aten.mm.default)  # not tagged
    assert not is_pointwise(aten.add_.Tensor) and not is_pointwise(aten.add.out)  # writes args
    assert not is_pointwise(aten.bernoulli.p)  # draws random numbers
    assert not is_pointwise(aten.add)  # a packet, not an overload
    assert is_reduction(aten.sum.dim_IntList) and not is_pointwise(aten.sum.dim_IntList)
    assert is_fusible(aten.amax.default) and not is_fusible(aten.softmax.int)


@pytest.mark.parametrize("op", [aten.mm.default, aten.add_.Tensor, aten.bernoulli.p])
def test_an_unfusible_op_is_refused_by_name(op):
    with pytest.raises(UnfusibleOpError, match=rf"step 0: {op} cannot be fused"):
        _one_step(op, InputRef(0), InputRef(1))


def test_a_reduction_may_only_end_a_chain():
    with pytest.raises(UnfusibleOpError, match=r"step 0: the reduction aten.sum.default may only "
                                               r"end a chain \(1 steps follow\)"):
        Chain((F32,), (Step(aten.sum.default, (InputRef(0),)),
                       Step(aten.neg.default, (StepRef(0),))), (Output(1),))


@pytest.mark.parametrize("args, outputs, error, message", [
    ((InputRef(2), InputRef(0)), (Output(0),), ValueError, "refers to input 2; the chain has 2"),
    ((StepRef(0), InputRef(0)), (Output(0),), ValueError, "refers to step 0, which is not an "
                                                          "earlier step"),
    ((InputRef(0), object()), (Output(0),), TypeError, "not object"),
    ((InputRef(0), InputRef(1)), (), ValueError, "at least one output"),
    ((InputRef(0), InputRef(1)), (Output(1),), ValueError, "output names step 1"),
    ((InputRef(0), InputRef(1)), (Output(0, 0), Output(0, 0)), ValueError, "same input"),
])
def test_malformed_chains_are_refused(args, outputs, error, message):
    with pytest.raises(error, match=message):
        _one_step(aten.add.Tensor, *args, outputs=outputs)


def test_an_output_into_a_scalar_input_is_refused():
    with pytest.raises(ValueError, match="input 1, which is not a tensor input"):
        _one_step(aten.add.Tensor, InputRef(0), InputRef(1), inputs=(F32, Scalar(1.0)),
                  outputs=(Output(0, into_input=1),))


def test_inputs_are_tensor_specs_or_scalars():
    with pytest.raises(TypeError, match="chain input 0 is a Tensor"):
        Chain((torch.ones(2),), (Step(aten.neg.default, (InputRef(0),)),), (Output(0),))
    with pytest.raises(TypeError, match="Scalar holds a Python number, not str"):
        Scalar("1")
    with pytest.raises(ValueError, match="differ in length"):
        TensorSpec(torch.float32, (2, 2), (1,))


def test_signature_names_everything_the_kernel_depends_on():
    chain, _ = chains.arithmetic()
    sig = chain.signature()
    hash(sig)
    assert sig == chains.arithmetic()[0].signature()  # same chain, new random inputs
    assert sig[-1] == torch.get_num_threads() and chain.signature(threads=7)[-1] == 7
    assert "aten.mul.Tensor" in repr(sig) and "torch.float32" in repr(sig)

    def variant(**changes):
        inputs = list(chain.inputs)
        inputs[0] = TensorSpec(**{**vars(inputs[0]), **changes})
        return Chain(tuple(inputs), chain.steps, chain.outputs).signature()

    assert len({sig, variant(dtype=torch.float16), variant(size=(96, 1), stride=(1, 1)),
                variant(stride=(1, 96)), variant(storage_offset=3)}) == 5
    scaled = Chain(chain.inputs[:2] + (Scalar(0.25),), chain.steps, chain.outputs)
    assert scaled.signature() != sig
    as_int = Chain(chain.inputs[:2] + (Scalar(1),), chain.steps, chain.outputs)
    as_float = Chain(chain.inputs[:2] + (Scalar(1.0),), chain.steps, chain.outputs)
    assert as_int.signature() != as_float.signature()  # 1 and 1.0 promote differently
    assert len(chain.digest()) == 24 and chain.digest() != scaled.digest()


def test_step_specs_are_what_eager_produces():
    chain, inputs = chains.promoting()
    results = chain.run_eager(inputs)
    for spec, result in zip(chain.output_specs(), results):
        assert spec == TensorSpec.of(result)
    assert [s.dtype for s in chain.step_specs] == [torch.int32, torch.float16, torch.float16,
                                                   torch.float16, torch.float16]


def test_an_op_with_several_results_is_refused():
    # aten.frexp is tagged pointwise but returns (mantissa, exponent): a step has one result.
    assert torch.Tag.pointwise in aten.frexp.Tensor.tags
    with pytest.raises(UnfusibleOpError, match="step 0: aten.frexp.Tensor cannot be fused"):
        _one_step(aten.frexp.Tensor, InputRef(0), inputs=(F32,))
