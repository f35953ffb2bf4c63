"""The native sum kernel (csrc/aten/native/Reductions.cpp) against the CPU: the cases it takes
(float32 over any dims, keepdim, strided inputs, a 0-dim tensor) and those it hands to the
fallback (a dtype= conversion, integers, float16, empty tensors). Both paths run the CPU's own
kernel, so results must be bit-identical; errors must be the CPU's."""

import pytest
import torch

CASES = [((16, 16), [0], True), ((16, 16), [0], False), ((16, 16), [1], False),
         ((4, 5, 6), [1, -1], False), ((4, 5, 6), [0, 2], True), ((4, 5, 6), None, False),
         ((7,), [], False), ((3, 4), [-2], True), ((), None, False), ((), [0], True),
         ((300, 70), [0], True)]


def both(fn, x):
    """fn on x and on its neuron copy: the same error, or bit-identical results."""
    try:
        expected = fn(x)
    except Exception as cpu_error:  # the CPU's error is the specification
        with pytest.raises(type(cpu_error)) as dev_error:
            fn(x.to("neuron"))
        assert str(dev_error.value) == str(cpu_error)
        return None
    got = fn(x.to("neuron"))
    assert got.device.type == "neuron"
    assert got.shape == expected.shape and got.stride() == expected.stride()
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
    return got


@pytest.mark.parametrize("shape,dim,keepdim", CASES, ids=str)
def test_sum_over_dims_is_the_cpus(shape, dim, keepdim):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    both(lambda t: t.sum() if dim is None else t.sum(dim, keepdim=keepdim), x)


def test_strided_inputs():
    x = torch.randn(9, 8, 6)
    both(lambda t: t.transpose(0, 2).sum(0), x)
    both(lambda t: t[:, ::2, 1:].sum((0, 1)), x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, torch.int32,
                                   torch.bool])
def test_other_dtypes_go_through_the_fallback(dtype):
    x = (torch.randn(12, 10) * 4).to(dtype)
    both(lambda t: t.sum(0), x)
    both(lambda t: t.sum(), x)


def test_a_dtype_conversion_and_an_empty_tensor():
    x = torch.randn(5, 6)
    both(lambda t: t.sum(1, dtype=torch.float16), x)
    both(lambda t: t.sum(0), torch.randn(0, 3))
    both(lambda t: t.sum(), torch.randn(0))


@pytest.mark.parametrize("dims", [[2], [0, 0], [-3], [0, -2]], ids=str)
def test_bad_dims_raise_the_cpus_errors(dims):
    assert both(lambda t: t.sum(dims), torch.randn(3, 4)) is None


def test_the_result_is_new_neuron_memory():
    x = torch.ones(100, 10, device="neuron")
    before = torch.neuron.memory_allocated()
    s = x.sum(0)
    assert torch.neuron.memory_allocated() == before + 512  # 40 bytes, one 512-byte block
    assert s.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    del s
    assert torch.neuron.memory_allocated() == before


def test_a_linear_layers_bias_gradient():
    # autograd's sum_to_size: the bias gradient is a keepdim sum over the batch.
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(16, 8), torch.randn(32, 16)
    device_layer = torch.nn.Linear(16, 8).to("neuron")
    device_layer.load_state_dict(layer.state_dict())
    layer(x).sum().backward()
    device_layer(x.to("neuron")).sum().backward()
    for p, q in zip(layer.parameters(), device_layer.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=0, atol=0)


def test_float64_follows_the_device_policy():
    from torchneuron.ops.dtype_policy import float64_policy

    with float64_policy("error"):
        with pytest.raises(NotImplementedError, match="float64"):
            torch.ones(3, dtype=torch.float64, device="neuron").sum()
