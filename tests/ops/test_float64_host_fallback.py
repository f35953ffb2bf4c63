"""float64 and complex128 arithmetic on neuron is a host fallback by default (NEURON_FLOAT64=warn),
as AWS's TorchNeuron runs dtypes Trainium lacks on the CPU: each op computes what the CPU computes,
warns once per op per process that it would run on the host on Trainium, and is counted per op
(torchneuron.ops.dtype_policy.host_fallback_counts) for the readiness accounting. `error` refuses,
`allow` computes without the warning (tests/core/test_errors.py)."""

import warnings

import numpy as np
import pytest
import torch

from torchneuron.ops import dtype_policy

HOST = r"aten::mul\.Tensor computes in float64 .* on Trainium it would run on the host"


@pytest.fixture(autouse=True)
def fresh_counts():
    assert dtype_policy.get() == "warn", "the suite runs with the default policy"
    dtype_policy.reset_host_fallback_counts()
    yield
    dtype_policy.reset_host_fallback_counts()


def _float64_warnings(record):
    return [w for w in record if "float64" in str(w.message)]


def test_the_default_computes_as_the_cpu_and_warns_once_per_op():
    d = torch.randn(5, dtype=torch.float64)
    n = d.to("neuron")
    with pytest.warns(UserWarning, match=HOST):
        got = n * n
    torch.testing.assert_close(got.cpu(), d * d)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(3):
            n * n
        n + n  # another op: its own first warning
    messages = [str(w.message) for w in _float64_warnings(record)]
    assert len(messages) == 1 and "aten::add.Tensor" in messages[0], messages
    counts = dtype_policy.host_fallback_counts()
    assert counts["aten::mul.Tensor"] == 4 and counts["aten::add.Tensor"] == 1, counts


def test_allow_counts_without_warning():
    c = torch.randn(4, dtype=torch.complex128)
    n = c.to("neuron")  # a copy: data movement, not counted
    with dtype_policy.float64_policy("allow"), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = n.abs()
    assert not _float64_warnings(record)
    torch.testing.assert_close(got.cpu(), c.abs())
    counts = dtype_policy.host_fallback_counts()
    assert list(counts.values()) == [1] and next(iter(counts)).startswith("aten::abs"), counts


def test_data_movement_is_not_a_host_fallback():
    d = torch.randn(3, 4, dtype=torch.float64)
    n = d.to("neuron")
    torch.testing.assert_close(torch.cat([n, n]).t().contiguous().cpu(), torch.cat([d, d]).t())
    assert dtype_policy.host_fallback_counts() == {}


def test_a_numpy_array_moved_to_neuron_computes_as_on_the_cpu():
    a = np.linspace(0.0, 1.0, 7)  # float64, NumPy's default
    expected = torch.from_numpy(a) * 3 + 1
    with pytest.warns(UserWarning, match="float64"):
        got = torch.from_numpy(a).to("neuron") * 3 + 1
    assert got.dtype == torch.float64
    torch.testing.assert_close(got.cpu(), expected)


def test_float64_as_the_default_dtype_trains_as_on_the_cpu():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        twin = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        twin.load_state_dict(model.state_dict())
        twin.to("neuron")
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for m, dev in ((model, "cpu"), (twin, "neuron")):
                opt = torch.optim.Adam(m.parameters(), lr=1e-2, foreach=False)
                for _ in range(3):
                    opt.zero_grad()
                    torch.nn.functional.mse_loss(m(x.to(dev)), y.to(dev)).backward()
                    opt.step()
        assert next(twin.parameters()).dtype == torch.float64
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(q.cpu(), p)  # float64's own (tight) tolerances
    finally:
        torch.set_default_dtype(previous)
    assert dtype_policy.host_fallback_counts().get("aten::addmm", 0) > 0


def test_autocast_leaves_float64_ops_as_on_the_cpu():
    d = torch.randn(4, 4, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast("neuron", dtype=torch.bfloat16):
            got = torch.mm(d.to("neuron"), d.to("neuron"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = torch.mm(d, d)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected)


def test_a_dtype_argument_asking_for_float64_is_a_host_fallback():
    x = torch.randn(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = x.to("neuron").sum(dtype=torch.float64)
    torch.testing.assert_close(got.cpu(), x.sum(dtype=torch.float64))
    assert [k for k in dtype_policy.host_fallback_counts() if k.startswith("aten::sum")], \
        dtype_policy.host_fallback_counts()
