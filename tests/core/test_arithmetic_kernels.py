"""The native add/sub/mul/div kernels (csrc/aten/native/Arithmetic.cpp) against the CPU: every form
(functional, in-place, out=), operand kinds that take the fast path (same dtype, Python numbers,
0-dim CPU tensors, broadcasting, strided views) and those it hands to the fallback (mixed
dtypes, integer true division, float64, reduced precision with a Python number). Both paths run
the CPU's own kernel, so results must be bit-identical; errors must be the CPU's."""

import warnings

import pytest
import torch

OPS = {
    "add": lambda a, b, **kw: torch.add(a, b, **kw),
    "sub": lambda a, b, **kw: torch.sub(a, b, **kw),
    "mul": lambda a, b, **kw: torch.mul(a, b, **kw),
    "div": lambda a, b, **kw: torch.div(a, b, **kw),
}
INPLACE = {
    "add": lambda a, b, **kw: a.add_(b, **kw),
    "sub": lambda a, b, **kw: a.sub_(b, **kw),
    "mul": lambda a, b, **kw: a.mul_(b, **kw),
    "div": lambda a, b, **kw: a.div_(b, **kw),
}
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.complex64, torch.int64,
          torch.int32, torch.uint8, torch.bool]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    return torch.randint(1, 9, shape, generator=g, dtype=dtype)


def to_neuron(v):
    # 0-dim CPU tensors stay on the CPU: CUDA (and neuron) accept them as scalars.
    if isinstance(v, torch.Tensor) and v.dim() > 0:
        return v.to("neuron")
    return v


def run_both(fn, *args, **kwargs):
    """fn on the CPU arguments and on their neuron copies: both raise the same error, or both
    return results that are equal bit for bit (the same CPU kernel computes both)."""
    cpu_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    dev_args = [to_neuron(a) for a in args]
    try:
        expected = fn(*cpu_args, **kwargs)
    except Exception as cpu_error:  # the CPU's error is the specification
        with pytest.raises(type(cpu_error)) as dev_error:
            fn(*dev_args, **kwargs)
        assert str(dev_error.value).split("\n")[0] == str(cpu_error).split("\n")[0]
        return None
    actual = fn(*dev_args, **kwargs)
    assert actual.device.type == "neuron"
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    for cpu_arg, dev_arg in zip(cpu_args, dev_args):  # in-place and out= arguments
        if isinstance(dev_arg, torch.Tensor) and dev_arg.device.type == "neuron":
            torch.testing.assert_close(dev_arg.cpu(), cpu_arg, rtol=0, atol=0, equal_nan=True)
    return actual


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_same_dtype_tensors(op, dtype):
    a, b = make((3, 5), dtype, 1), make((3, 5), dtype, 2)
    run_both(OPS[op], a, b)
    run_both(OPS[op], a, b[0])                      # broadcasting
    run_both(OPS[op], a.t(), make((5, 3), dtype, 3).t())  # strided views
    run_both(OPS[op], make((0, 5), dtype), b[0])    # empty


@pytest.mark.parametrize("number", [2, 0.5, True, 1 + 2j, -3], ids=repr)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_python_numbers(op, dtype, number):
    a = make((4, 3), dtype, 1)
    run_both(OPS[op], a, number)
    run_both(INPLACE[op], a, number)


@pytest.mark.parametrize("op", OPS)
def test_python_number_on_the_left(op):
    a = make((6,), torch.float32)
    run_both(lambda x: 2.5 * x if op == "mul" else 2.5 + x if op == "add"
             else 2.5 - x if op == "sub" else 2.5 / x, a)


@pytest.mark.parametrize("op", OPS)
def test_zero_dim_cpu_and_neuron_operands(op):
    a = make((4, 3), torch.float32)
    run_both(OPS[op], a, torch.tensor(1.5))                        # 0-dim CPU, same dtype
    run_both(OPS[op], a, torch.tensor(3))                          # 0-dim CPU, other dtype
    dev = a.to("neuron")
    scalar = torch.tensor(2.0, dtype=torch.float16)
    torch.testing.assert_close(OPS[op](dev, scalar.to("neuron")).cpu(), OPS[op](a, scalar),
                               rtol=0, atol=0)


@pytest.mark.parametrize("op", OPS)
def test_mixed_dtypes_take_the_fallback(op):
    run_both(OPS[op], make((5,), torch.float32), make((5,), torch.int64))
    run_both(OPS[op], make((5,), torch.int32), make((5,), torch.int64))
    run_both(OPS[op], make((5,), torch.bfloat16), make((5,), torch.float16))
    run_both(INPLACE[op], make((5,), torch.float32), make((5,), torch.int64))


def test_integer_true_division_promotes():
    run_both(OPS["div"], make((7,), torch.int64), make((7,), torch.int64))
    run_both(OPS["div"], make((7,), torch.int32), 2)
    run_both(OPS["div"], make((7,), torch.int32), make((7,), torch.int32),
             rounding_mode="floor")


@pytest.mark.parametrize("op", ["add", "sub"])
def test_alpha(op):
    run_both(OPS[op], make((5,), torch.float32, 1), make((5,), torch.float32, 2), alpha=0.25)
    run_both(OPS[op], make((5,), torch.int64, 1), make((5,), torch.int64, 2), alpha=3)
    run_both(INPLACE[op], make((5,), torch.float32, 1), make((5,), torch.float32, 2), alpha=-2)


@pytest.mark.parametrize("op", OPS)
def test_out_variants(op):
    a, b = make((3, 4), torch.float32, 1), make((3, 4), torch.float32, 2)
    run_both(lambda x, y, out: OPS[op](x, y, out=out), a, b, torch.empty(3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resizing a non-empty out= warns, as on the CPU
        run_both(lambda x, y, out: OPS[op](x, y, out=out), a, b, torch.empty(2))
    run_both(lambda x, y, out: OPS[op](x, y, out=out), a, b, torch.empty(0))
    # another out= dtype: the CPU casts into it (fallback path)
    run_both(lambda x, y, out: OPS[op](x, y, out=out), a, b,
             torch.empty(3, 4, dtype=torch.complex64))
    # a float out= for an integer result takes the fallback too
    run_both(lambda x, y, out: OPS[op](x, y, out=out), make((3,), torch.int64, 1),
             make((3,), torch.int64, 2), torch.empty(3))


def test_results_are_new_neuron_memory():
    a = torch.ones(1000, device="neuron")
    before = torch.neuron.memory_allocated()
    c = a + a
    assert torch.neuron.memory_allocated() == before + 4096
    assert c.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
    del c
    assert torch.neuron.memory_allocated() == before


def test_autograd_through_the_kernels():
    x = make((4, 4), torch.float32, 1).requires_grad_()
    y = make((4, 4), torch.float32, 2).requires_grad_()
    xd = x.detach().to("neuron").requires_grad_()
    yd = y.detach().to("neuron").requires_grad_()
    ((x + y) * (x - y) / (y * y + 1)).sum().backward()
    ((xd + yd) * (xd - yd) / (yd * yd + 1)).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)
    torch.testing.assert_close(yd.grad.cpu(), y.grad)


def test_float64_follows_the_device_policy():
    from torchneuron.ops.dtype_policy import float64_policy

    with float64_policy("error"):
        a = torch.ones(3, dtype=torch.float64, device="neuron")
        with pytest.raises(NotImplementedError, match="float64"):
            a + a
        with pytest.raises(NotImplementedError, match="float64"):
            a.mul_(2.0)


# The CPU's errors, raised the same way on neuron (run_both compares type and message).
def test_bool_subtraction_raises():
    run_both(OPS["sub"], make((3,), torch.bool, 1), make((3,), torch.bool, 2))


def test_float_alpha_for_integers_raises():
    run_both(OPS["add"], make((3,), torch.int64, 1), make((3,), torch.int64, 2), alpha=0.5)


def test_boolean_alpha_for_floats_raises():
    run_both(OPS["add"], make((3,), torch.float32, 1), make((3,), torch.float32, 2), alpha=True)


def test_inplace_broadcast_to_larger_shape_raises():
    run_both(INPLACE["add"], make((3,), torch.float32, 1), make((2, 3), torch.float32, 2))


def test_inplace_unsafe_cast_raises():
    run_both(INPLACE["mul"], make((3,), torch.int64, 1), make((3,), torch.float32, 2))


def test_overlapping_inplace_raises():
    run_both(lambda x: x.expand(3, 3).add_(1), make((3,), torch.float32))
    run_both(lambda x: torch.mul(x[1:], 2, out=x[:-1]), make((4,), torch.float32))
    # Tensor operands partly overlapping the result (the fast path keeps TensorIterator's overlap
    # checks wherever the result is not memory it has just allocated).
    run_both(lambda x: x[1:].add_(x[:-1]), make((4,), torch.float32))
    run_both(lambda x: torch.sub(x[1:], x[1:], out=x[:-1]), make((4,), torch.float32))
    run_both(lambda x: torch.div(x[:-1], x[:-1], out=x[1:]), make((4,), torch.float32))


def test_device_mixing_raises():
    dev = torch.ones(4, device="neuron")
    for op in OPS.values():
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            op(dev, torch.ones(4))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        dev + torch.ones(4, device="neuron:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.add(dev, dev, out=torch.empty(4))
