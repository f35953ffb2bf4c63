"""rope: rotate-half rotary embedding (q and grouped-query k) against transformers'
apply_rotary_pos_emb on the CPU, forward and gradients, and its errors."""

import pytest
import torch
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from torchneuron.kernels import library as kl
from torchneuron.kernels.library.rope import rope_kernel

from .compare import check_op

# (batch, q heads, kv heads, seq, head_dim): one tile, a partial tile, more than one tile.
SHAPES = [(1, 2, 2, 7, 8), (2, 4, 2, 70, 16), (1, 2, 1, 130, 32)]


def _inputs(batch, heads, kv_heads, seq, d, dtype, cos_batch=True):
    q = torch.randn(batch, heads, seq, d, dtype=dtype)
    k = torch.randn(batch, kv_heads, seq, d, dtype=dtype)
    angles = torch.randn(batch if cos_batch else 1, seq, d // 2).repeat(1, 1, 2)
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    return q, k, (cos if cos_batch else cos[0]), (sin if cos_batch else sin[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_the_reference(mode, shape, dtype):
    check_op(kl.rope, kl.rope_reference, list(_inputs(*shape, dtype)), differentiable=(0, 1))


def test_cos_sin_without_batch_and_arbitrary_tables(mode):
    """(seq, d) tables; and cos/sin whose halves differ, which only the exact transposed
    rotation differentiates right."""
    q, k, cos, sin = _inputs(2, 2, 2, 9, 8, torch.float32, cos_batch=False)
    check_op(kl.rope, kl.rope_reference, [q, k, cos, sin], differentiable=(0, 1))
    check_op(kl.rope, kl.rope_reference, [q, k, torch.randn(9, 8), torch.randn(9, 8)],
             differentiable=(0, 1))


def test_reference_is_transformers_apply_rotary_pos_emb():
    q, k, cos, sin = _inputs(2, 4, 2, 11, 16, torch.float32)
    for ours, theirs in zip(kl.rope_reference(q, k, cos, sin),
                            apply_rotary_pos_emb(q, k, cos, sin)):
        torch.testing.assert_close(ours, theirs)


def test_kernel_in_the_simulator_on_cpu_tensors():
    q, k, cos, sin = _inputs(1, 2, 1, 140, 8, torch.float32)
    q_out, k_out = rope_kernel(q.reshape(2, 140, 8), k.reshape(1, 140, 8), cos, sin)
    q_ref, k_ref = kl.rope_reference(q, k, cos, sin)
    torch.testing.assert_close(q_out.reshape(q.shape), q_ref)
    torch.testing.assert_close(k_out.reshape(k.shape), k_ref)


def test_errors():
    q, k, cos, sin = (t.to("neuron") for t in _inputs(1, 2, 1, 6, 8, torch.float32))
    with pytest.raises(ValueError, match="head_dim 7 must be even"):
        kl.rope(q[..., :7], k[..., :7], cos[..., :7], sin[..., :7])
    with pytest.raises(ValueError, match=r"cos has shape \(1, 5, 8\); expected"):
        kl.rope(q, k, cos[:, :5], sin)
    with pytest.raises(ValueError, match=r"must be \(batch, heads, seq, head_dim\)"):
        kl.rope(q[0], k[0], cos, sin)
    with pytest.raises(ValueError, match="k .* must match q"):
        kl.rope(q, k[:, :, :5], cos, sin)
    with pytest.raises(ValueError, match="sin requires grad; rope treats cos and sin as constants"):
        kl.rope(q, k, cos, sin.clone().requires_grad_())
    with pytest.raises(TypeError, match="rope: q has dtype torch.int64"):
        kl.rope(q.long(), k, cos, sin)
    with pytest.raises(RuntimeError, match="rope: cos is on cpu"):
        kl.rope(q, k, cos.cpu(), sin)
