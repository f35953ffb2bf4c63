"""attention: causal and full, grouped-query heads, query and key lengths that are not multiples
of the 128-row tiles, against the materialized softmax on the CPU, forward and gradients."""

import pytest
import torch
import torch.nn.functional as F

from torchneuron.kernels import library as kl
from torchneuron.kernels.library.attention import attention_forward_kernel

from .compare import check_op

# (batch, heads, kv_heads, q_seq, kv_seq, head_dim, causal)
CASES = [(1, 2, 1, 7, 7, 8, True), (2, 4, 2, 130, 130, 16, True), (1, 2, 2, 70, 200, 32, False),
         (1, 1, 1, 200, 260, 16, True)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_matches_the_reference(mode, case, dtype):
    b, h, hk, sq, sk, d, causal = case
    q, k, v = (torch.randn(b, n, s, d).to(dtype) for n, s in ((h, sq), (hk, sk), (hk, sk)))
    check_op(lambda q, k, v: kl.attention(q, k, v, causal=causal),
             lambda q, k, v: kl.attention_reference(q, k, v, causal=causal), [q, k, v],
             differentiable=(0, 1, 2))


def test_scale_and_reference_equal_scaled_dot_product_attention(mode):
    q, k, v = torch.randn(1, 4, 33, 16), torch.randn(1, 2, 33, 16), torch.randn(1, 2, 33, 16)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3, enable_gqa=True)
    torch.testing.assert_close(kl.attention_reference(q, k, v, scale=0.3), expected)
    check_op(lambda q, k, v: kl.attention(q, k, v, scale=0.3),
             lambda q, k, v: kl.attention_reference(q, k, v, scale=0.3), [q, k, v], (0, 1, 2))


def test_forward_kernel_in_the_simulator_on_cpu_tensors():
    q, k, v = torch.randn(2, 150, 16), torch.randn(1, 150, 16), torch.randn(1, 150, 16)
    out, lse = attention_forward_kernel(q, k, v, 0.25, True)
    expected = kl.attention_reference(q[None], k[None], v[None], scale=0.25)[0]
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    scores = (q @ k.transpose(-1, -2) * 0.25).masked_fill(
        ~torch.ones(150, 150, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(lse.squeeze(-1), torch.logsumexp(scores, -1))


def test_errors():
    q, k = torch.randn(1, 3, 8, 16, device="neuron"), torch.randn(1, 2, 8, 16, device="neuron")
    with pytest.raises(ValueError, match="q's 3 heads must be a multiple of k's 2"):
        kl.attention(q, k, k)
    with pytest.raises(ValueError, match="head_dim 160 exceeds 128"):
        big = torch.randn(1, 2, 4, 160, device="neuron")
        kl.attention(big, big, big)
    with pytest.raises(ValueError, match=r"must be \(batch, heads, seq, head_dim\)"):
        kl.attention(q[0], k[0], k[0])
    with pytest.raises(ValueError, match="must share one dtype"):
        kl.attention(q.bfloat16(), k[:, :1], k[:, :1])
    with pytest.raises(ValueError, match="must be equal and match q"):
        kl.attention(q[:, :2], k, k[..., :8])
    with pytest.raises(RuntimeError, match="attention: v is on cpu"):
        kl.attention(q[:, :2], k, k.cpu())


def test_memory_grows_linearly_with_the_sequence():
    """Forward and backward at 512 and 2048 positions: the device allocator's peak grows about
    4x (linear), never by the 16x of a score matrix, and stays below one score matrix."""
    def peak(seq):
        q = torch.randn(1, 2, seq, 16, device="neuron", requires_grad=True)
        k = torch.randn(1, 1, seq, 16, device="neuron", requires_grad=True)
        v = torch.randn(1, 1, seq, 16, device="neuron", requires_grad=True)
        torch.neuron.synchronize()
        base = torch.neuron.memory_allocated()
        torch.neuron.reset_peak_memory_stats()
        kl.attention(q, k, v).sum().backward()
        torch.neuron.synchronize()
        return torch.neuron.max_memory_allocated() - base

    small, large = peak(512), peak(2048)
    assert large < 6 * small, (small, large)
    assert large < 2048 * 2048 * 4, large
