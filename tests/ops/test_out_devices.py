"""`out=` on another device raises, as CUDA does, for every op that takes out=, and nothing is
written to `out`: neuron inputs with a CPU out (also 0-dim: only a 0-dim CPU tensor may be read
as a scalar next to device tensors, never written), CPU inputs with a neuron out, and out on
another neuron device. Run over PyTorch's own OpInfo database."""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

SENTINEL = 7.0
# The devices named, or PyTorch's own op-specific wording (quantile: "out tensor must be on the
# same device as the input tensor", the same text CUDA gives).
DEVICE_MISMATCH_CPU = r"(?s)(neuron|privateuseone).*cpu|cpu.*neuron|must be on the same device"
DEVICE_MISMATCH_NEURON_1 = r"neuron:0.*neuron:1|neuron:1.*neuron:0|must be on the same device"


def _single_out_ops():
    ops = []
    for op in op_db:
        if not op.supports_out or torch.float32 not in op.supported_dtypes("cpu"):
            continue
        # Factories (arange, linspace, logspace's tensor overloads, ...) read their 0-dim
        # tensor arguments as numbers and take device= for the result: no device rule applies.
        if op.is_factory_function:
            continue
        ops.append(op)
    return ops


OPS = _single_out_ops()


def _first_sample(op):
    for sample in op.sample_inputs("cpu", torch.float32, requires_grad=False):
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:
            continue
        # Factories (arange, linspace, ...) take no tensor to put on neuron; sparse layouts on
        # neuron are their own issue.
        tensors = [t for t in (sample.input, *sample.args, *sample.kwargs.values())
                   if isinstance(t, torch.Tensor)]
        if isinstance(sample.input, torch.Tensor) and isinstance(expected, torch.Tensor) \
                and expected.numel() > 0 and all(t.layout == torch.strided for t in tensors) \
                and expected.layout == torch.strided:
            return sample, expected
    return None, None


def _to(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(o, device) for o in obj)
    return obj


def _call_with_out(op, sample, device, out):
    inp = _to(sample.input, device)
    args = _to(sample.args, device)
    kwargs = {k: _to(v, device) for k, v in sample.kwargs.items()}
    return op(inp, *args, **kwargs, out=out)


def _cases():
    cases = []
    for op in OPS:
        sample, expected = _first_sample(op)
        if sample is None:
            continue
        # Every fourth op in the default run, all of them in the slow suite.
        marks = () if len(cases) % 4 == 0 else (pytest.mark.slow,)
        cases.append(pytest.param(op, sample, expected, marks=marks,
                                  id=f"{op.name}.{op.variant_test_name}"
                                  if op.variant_test_name else op.name))
    return cases


CASES = _cases()


def test_the_battery_reaches_the_out_ops():
    assert len(CASES) >= 150, len(CASES)


@pytest.mark.parametrize("op,sample,expected", CASES)
def test_out_on_another_device_raises_and_writes_nothing(op, sample, expected):
    if expected.dtype.is_floating_point or expected.dtype.is_complex:
        fill = SENTINEL
    else:
        fill = 1
    # neuron inputs, CPU out
    out_cpu = torch.full_like(expected, fill)
    with pytest.raises(RuntimeError, match=DEVICE_MISMATCH_CPU):
        _call_with_out(op, sample, "neuron", out_cpu)
    assert torch.equal(out_cpu, torch.full_like(expected, fill)), "out was written"
    # neuron inputs on neuron:0, out on neuron:1
    out_other = torch.full_like(expected, fill, device="neuron:1")
    with pytest.raises(RuntimeError, match=DEVICE_MISMATCH_NEURON_1):
        _call_with_out(op, sample, "neuron:0", out_other)
    assert torch.equal(out_other.cpu(), torch.full_like(expected, fill)), "out was written"


def test_same_device_out_still_works():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    out = torch.empty(3, 4, device="neuron")
    torch.add(a.to("neuron"), b.to("neuron"), out=out)
    torch.testing.assert_close(out.cpu(), a + b)
    # 0-dim CPU tensors are read as scalars next to neuron tensors, as on CUDA
    torch.mul(a.to("neuron"), torch.tensor(2.0), out=out)
    torch.testing.assert_close(out.cpu(), a * 2)


@pytest.mark.parametrize("out_device", ["cpu", "neuron:1"])
def test_zero_dim_neuron_inputs_with_out_elsewhere(out_device):
    x = torch.tensor(2.0, device="neuron")
    out = torch.full((), SENTINEL, device=out_device)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.add(x, x, out=out)
    assert out.item() == SENTINEL
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(x.reshape(1, 1), x.reshape(1, 1), out=torch.empty(1, 1, device=out_device))


def test_cpu_inputs_with_neuron_out():
    a = torch.randn(3)
    out = torch.full((3,), SENTINEL, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sin(a, out=out)
    assert torch.equal(out.cpu(), torch.full((3,), SENTINEL))


def test_in_place_on_a_cpu_scalar_with_neuron_operand():
    s = torch.tensor(1.0)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        s.add_(torch.tensor(2.0, device="neuron"))
    assert s.item() == 1.0
