"""A compressed sparse tensor (CSR, CSC, BSR, BSC) times a 0-d tensor on neuron, against the CPU,
with the samples of PyTorch's `_refs.mul` OpInfo:
- `torch.mul` computes what the CPU computes;
- the Python reference `torch._refs.mul` keeps a 0-d operand as a scalar only when it is on the
  CPU (`_maybe_broadcast`'s `is_cpu_scalar_tensor`, the same for CUDA tensors): with the scalar on
  the CPU it computes what the CPU computes, and with the scalar on neuron it expands it to a
  dense tensor of the sparse operand's shape and then does what the CPU does with that operand
  (several layouts raise for it there too; docs/compat-ops.md, "Known failures")."""

import pytest
import torch
import torch._refs

LAYOUTS = [torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc]


def _scalar_samples(layout):
    from torch.testing._internal.common_methods_invocations import python_ref_db

    (op,) = [o for o in python_ref_db if o.name == "_refs.mul"]
    samples = [(s.input, s.args[0]) for s in op.sample_inputs_sparse(layout, "cpu", torch.float32)
               if s.args[0].layout == torch.strided and s.args[0].dim() == 0]
    assert samples
    return samples


def _outcome(fn):
    try:
        out = fn()
    except RuntimeError as e:
        return None, str(e)
    return out.cpu().to_dense(), None


def _same(got, want):
    (got_out, got_error), (want_out, want_error) = got, want
    assert got_error == want_error
    if want_error is None:
        torch.testing.assert_close(got_out, want_out)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_mul_by_a_zero_dim_tensor_matches_cpu(layout):
    for sparse, scalar in _scalar_samples(layout):
        a, s = sparse.to("neuron"), scalar.to("neuron")
        assert a.layout == layout
        want = _outcome(lambda: torch.mul(sparse, scalar))
        assert want[1] is None
        _same(_outcome(lambda: torch.mul(a, s)), want)
        # The reference with the scalar on the CPU: the scalar path, as on the CPU.
        _same(_outcome(lambda: torch._refs.mul(a, scalar)),
              _outcome(lambda: torch._refs.mul(sparse, scalar)))
        # With the scalar on neuron: what the CPU does with the dense operand the reference
        # makes of a 0-d tensor that is not on the CPU.
        _same(_outcome(lambda: torch._refs.mul(a, s)),
              _outcome(lambda: torch._refs.mul(sparse, scalar.expand(sparse.shape))))
