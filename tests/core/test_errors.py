"""Errors are the CUDA backend's, with messages that name neuron; no error corrupts state."""

import numpy  # noqa: F401  (Tensor.numpy needs it importable)
import pytest
import torch


def test_mixing_neuron_and_cpu_raises_like_cuda():
    with pytest.raises(RuntimeError, match=r"same device.*neuron:0 and cpu"):
        torch.ones(3, device="neuron") + torch.ones(3)
    with pytest.raises(RuntimeError, match=r"same device.*neuron:0.*neuron:1"):
        torch.ones(3, device="neuron:0") * torch.ones(3, device="neuron:1")
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(torch.ones(2, 2, device="neuron"), torch.ones(2, 2))


def test_cpu_scalar_tensor_is_accepted_like_cuda():
    a = torch.randn(4)
    torch.testing.assert_close((a.neuron() * torch.tensor(3.0)).cpu(), a * 3)


def test_numpy_on_neuron_tensor_hints_cpu():
    with pytest.raises(TypeError, match=r"neuron.*Tensor\.cpu\(\)"):
        torch.ones(2, device="neuron").numpy()


@pytest.mark.parametrize("make", [
    lambda: torch.ones(1, device="neuron:99"),
    lambda: torch.ones(1).to("neuron:99"),
    lambda: torch.neuron.set_device(99),
    lambda: torch.neuron.memory_allocated(99),
])
def test_bad_device_index(make):
    with pytest.raises((IndexError, RuntimeError), match=r"neuron.*99|99.*neuron"):
        make()


def test_out_of_memory_then_keeps_working(python):
    code = """
import torch
a = torch.empty(40 << 20, dtype=torch.uint8, device="neuron")
try:
    torch.empty(40 << 20, dtype=torch.uint8, device="neuron")
except torch.OutOfMemoryError as e:
    msg = str(e)
assert "neuron out of memory" in msg and "40.00 MiB" in msg and "64.00 MiB" in msg, msg
assert torch.neuron.memory_stats()["num_ooms"] == 1
del a
torch.neuron.empty_cache()
b = torch.ones(40 << 20, dtype=torch.uint8, device="neuron")
assert b[:1000].sum().item() == 1000
print("ok")
"""
    out = python(code, env={"NEURON_HBM_BYTES": "64MiB"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_oom_retries_after_freeing_the_cache(python):
    code = """
import torch
a = torch.empty(40 << 20, dtype=torch.uint8, device="neuron"); del a   # now cached
b = torch.empty(50 << 20, dtype=torch.uint8, device="neuron")            # needs the cache back
s = torch.neuron.memory_stats()
assert s["num_alloc_retries"] == 1 and s["num_ooms"] == 0, s
print("ok")
"""
    out = python(code, env={"NEURON_HBM_BYTES": "64MiB"})
    assert out.returncode == 0, out.stderr


def test_failed_op_leaves_inputs_unchanged():
    a = torch.randn(3, 4)
    b = torch.randn(5, 6)
    an, bn = a.neuron(), b.neuron()
    with pytest.raises(RuntimeError):
        an.add_(bn)
    with pytest.raises(RuntimeError):
        torch.mm(an, bn)
    torch.testing.assert_close(an.cpu(), a)
    torch.testing.assert_close(bn.cpu(), b)


def test_float64_arithmetic_is_refused_under_the_error_policy():
    from torchneuron.ops.dtype_policy import float64_policy

    d = torch.randn(3, dtype=torch.float64)
    n = d.neuron()  # storing and copying float64 is fine
    with float64_policy("error"):
        assert torch.equal(n.cpu(), d)
        with pytest.raises(NotImplementedError, match=r"aten::mul.*float64.*NEURON_FLOAT64=warn"):
            n * n
        print(n)  # printing is not arithmetic


def test_float64_policy_allow():
    from torchneuron.ops.dtype_policy import float64_policy

    d = torch.randn(3, dtype=torch.float64)
    with float64_policy("allow"):
        torch.testing.assert_close((d.neuron() * 2).cpu(), d * 2)
    with pytest.raises(ValueError, match="float64 policy"):
        with float64_policy("sometimes"):
            pass


def test_layouts_cuda_lacks_are_rejected():
    # Sparse layouts live on neuron as on CUDA (tests/ops/test_sparse.py); these do not.
    with pytest.raises(NotImplementedError, match="mkldnn layout: neuron"):
        torch.empty(2, 2, device="neuron", layout=torch._mkldnn)
    with pytest.raises(RuntimeError, match="neuron supports strided tensors only, got layout "
                                           "Jagged"):
        torch.empty(2, 2, device="neuron", layout=torch.jagged)
