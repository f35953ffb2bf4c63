"""torchneuron._C.compile.empty_strided, the buffer allocation of torch.compile's generated wrapper
(`empty_strided_neuron`): the tensor torch.empty_strided gives, from the neuron allocator, and a
clear error for every malformed call."""

import pytest
import torch

from torchneuron._C import compile as _compile_c

SHAPES = [((), ()), ((0, 3), (3, 1)), ((4, 5), (5, 1)), ((4, 5), (1, 4)),
          ((2, 3, 4), (1, 2, 6)), ((3, 1, 2), (2, 99, 1))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool],
                         ids=str)
@pytest.mark.parametrize("size, stride", SHAPES, ids=str)
def test_same_tensor_as_empty_strided_on_the_cpu(size, stride, dtype):
    got = _compile_c.empty_strided(size, stride, dtype)
    want = torch.empty_strided(size, stride, dtype=dtype)
    assert got.device == torch.device("neuron", torch.neuron.current_device())
    assert (got.shape, got.stride(), got.dtype, got.storage_offset()) == \
        (want.shape, want.stride(), want.dtype, want.storage_offset())
    assert got.untyped_storage().nbytes() == want.untyped_storage().nbytes()
    # The memory is usable: what is written reads back as on the CPU.
    values = torch.arange(want.numel()).reshape(want.shape).to(dtype)
    got.copy_(values.neuron())
    want.copy_(values)
    torch.testing.assert_close(got.cpu(), want)


def test_memory_comes_from_the_neuron_allocator():
    before = torch.neuron.memory_allocated()
    t = _compile_c.empty_strided((1024, 1024), (1024, 1), torch.float32)
    assert torch.neuron.memory_allocated() - before >= 4 * 1024 * 1024
    del t
    assert torch.neuron.memory_allocated() == before


def test_allocates_on_the_current_device():
    if torch.neuron.device_count() < 2:
        pytest.skip("needs two neuron devices")
    with torch.neuron.device(1):
        t = _compile_c.empty_strided((2,), (1,), torch.float32)
        assert t.device == torch.device("neuron", 1)


@pytest.mark.parametrize("args, error, message", [
    (((2,), (1,)), TypeError, r"takes 3 positional arguments, got 2"),
    (([2], (1,), torch.float32), TypeError, r"size must be a tuple of ints, got list"),
    (((2,), 1, torch.float32), TypeError, r"stride must be a tuple of ints, got int"),
    (((2.0,), (1,), torch.float32), TypeError, r"size must be a tuple of ints, got a float at "
                                                r"index 0"),
    (((2,), (1,), "float32"), TypeError, r"dtype must be a torch.dtype, got str"),
    (((2, 3), (1,), torch.float32), ValueError, r"size has 2 dimensions but stride has 1"),
    (((-1,), (1,), torch.float32), RuntimeError, r"negative"),
    (((2 ** 70,), (1,), torch.float32), OverflowError, r"size\[0\] does not fit in 64 bits"),
], ids=["arity", "size_list", "stride_int", "size_float", "dtype_str", "rank_mismatch",
        "negative_size", "overflow"])
def test_malformed_calls_raise_naming_the_problem(args, error, message):
    with pytest.raises(error, match=message):
        _compile_c.empty_strided(*args)
