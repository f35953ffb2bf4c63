"""Where the CPU's own kernels decide a result, neuron gives the CPU's result or the CPU's error:
one-element fills convert the value as the CPU does, copies between views of one tensor follow
the CPU's copy_, composites that branch on the device take the CPU's branch, and asking for
float64 arithmetic with dtype= meets the float64 policy as a float64 operand does."""

import pytest
import torch


def outcome(fn, device):
    try:
        return fn(device).cpu()
    except Exception as e:  # the CPU's error is part of the semantics
        return (type(e), str(e).split("\n")[0])


def assert_same_as_cpu(fn):
    cpu, neuron = outcome(fn, "cpu"), outcome(fn, "neuron")
    if isinstance(cpu, tuple) or isinstance(neuron, tuple):
        assert cpu == neuron
    else:
        torch.testing.assert_close(neuron, cpu, equal_nan=True)


HALF_LIKE = [torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.mark.parametrize("dtype", HALF_LIKE + [torch.float32, torch.int8, torch.uint8,
                                               torch.bool, torch.complex32])
@pytest.mark.parametrize("value", [1e5, 1e39, -1e39, 300, -1, float("inf")])
@pytest.mark.parametrize("make", [
    lambda v, dt, d: torch.full((1,), v, dtype=dt, device=d),
    lambda v, dt, d: torch.empty(1, dtype=dt, device=d).fill_(v),
    lambda v, dt, d: torch.scalar_tensor(v, dtype=dt, device=d),
    lambda v, dt, d: torch.full((3,), v, dtype=dt, device=d),
], ids=["full1", "fill1", "scalar_tensor", "full3"])
def test_fill_converts_values_as_the_cpu(make, value, dtype):
    assert_same_as_cpu(lambda d: make(value, dtype, d))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_where_with_an_out_of_range_scalar(dtype):
    assert_same_as_cpu(lambda d: torch.where(torch.tensor([True, False], device=d),
                                             torch.tensor([1.0, 2.0], dtype=dtype, device=d),
                                             1e5))


COPIES = {
    "same view": lambda x: x.copy_(x.view_as(x)),
    "same tensor": lambda x: x.copy_(x),
    "expanded into itself": lambda x: x[:1].expand(4, 6).copy_(x[:1].expand(4, 6)),
    "transpose square": lambda x: x[:, :4].copy_(x[:, :4].t()),
    "partial overlap": lambda x: x.view(-1)[1:].copy_(x.view(-1)[:-1]),
    "expanded destination": lambda x: x[:1].expand(4, 6).copy_(torch.ones(4, 6, device=x.device)),
    "transpose large": lambda x: x.copy_(x.t()) if x.shape[0] == x.shape[1] else x,
    "to half, same storage view": lambda x: x.half().copy_(x),
}


@pytest.mark.parametrize("name", sorted(COPIES))
def test_copy_between_views_of_one_tensor(name):
    def run(d):
        x = torch.arange(24.0, device=d).view(4, 6)
        COPIES[name](x)
        return x
    assert_same_as_cpu(run)


def test_copy_transposed_in_place_large():
    def run(d):
        x = torch.arange(400.0 * 400, device=d).view(400, 400)
        x.copy_(x.t())
        return x
    assert_same_as_cpu(run)


def test_complex_to_real_copy_warns_as_on_the_cpu():
    src = torch.tensor([1 + 2j, 3 - 1j])
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        torch.empty(2, device="neuron").copy_(src.to("neuron"))


@pytest.mark.parametrize("fn", [
    lambda d: torch.ldexp(torch.tensor([1.0, 2.0], device=d), torch.tensor([True, False], device=d)),
    lambda d: torch.ldexp(torch.tensor([1.0, 2.0], dtype=torch.float16, device=d),
                          torch.tensor([100, 20], device=d)),
    lambda d: torch.ldexp(torch.tensor([1.0, 2.0], dtype=torch.float16, device=d),
                          torch.tensor([10, 20], dtype=torch.float16, device=d)),
    lambda d: torch.ldexp(torch.tensor([3.0, -1.5], device=d), torch.tensor([3, -2], device=d)),
    lambda d: torch.tensor([3.0, -1.5], device=d).ldexp_(torch.tensor([3, -2], device=d)),
    lambda d: torch.ldexp(torch.tensor([3.0], device=d), torch.tensor([2], device=d),
                          out=torch.empty(1, device=d)),
], ids=["bool", "half-large-int", "half-half", "float", "inplace", "out"])
def test_ldexp_takes_the_cpus_path(fn):
    assert_same_as_cpu(fn)


@pytest.mark.parametrize("fn", [
    lambda x: x.sum(dtype=torch.float64),
    lambda x: x.sum(0, dtype=torch.float64),
    lambda x: x.cumsum(0, dtype=torch.float64),
    lambda x: x.mean(dtype=torch.float64),
    lambda x: x.prod(dtype=torch.float64),
    lambda x: torch.softmax(x, 0, dtype=torch.float64),
    lambda x: torch.nn.functional.log_softmax(x, 0, dtype=torch.float64),
    lambda x: x.sum(dtype=torch.complex128),
], ids=["sum", "sum-dim", "cumsum", "mean", "prod", "softmax", "log_softmax", "sum-c128"])
def test_asking_float64_by_dtype_meets_the_policy(fn):
    from torchneuron.ops.dtype_policy import float64_policy

    x = torch.arange(1.0, 5.0, device="neuron")
    with float64_policy("error"), pytest.raises(NotImplementedError,
                                                match="float64 .*Trainium has no float64"):
        fn(x)


def test_float64_by_dtype_computes_as_the_cpu_when_allowed():
    from torchneuron.ops.dtype_policy import float64_policy

    x = torch.arange(1.0, 5.0)
    with float64_policy("allow"):
        torch.testing.assert_close(x.to("neuron").cumsum(0, dtype=torch.float64).cpu(),
                                   x.cumsum(0, dtype=torch.float64))


def test_storing_float64_stays_allowed():
    x = torch.arange(1.0, 5.0)
    torch.testing.assert_close(x.to("neuron").to(torch.float64).cpu(), x.double())
    torch.testing.assert_close(x.to("neuron").sum(dtype=torch.float32).cpu(), x.sum())
