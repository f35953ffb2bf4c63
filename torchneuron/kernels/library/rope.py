"""Rotary position embedding in Hugging Face's rotate-half layout:
    out = x * cos + rotate_half(x) * sin,   rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]),
applied to q (batch, heads, seq, d) and k (batch, kv_heads, seq, d) with cos and sin of shape
(batch, seq, d) or (seq, d), shared by all heads (grouped-query k may have fewer heads).

The backward is the transposed rotation: dx = g * cos + rotate_half^T(g * sin), with
rotate_half^T(y) = cat(y[..., d/2:], -y[..., :d/2]). cos and sin are positions' constants (Hugging
Face computes them without gradient): the op gives them no gradient and refuses ones that ask
for it.
"""

from __future__ import annotations

import math

import torch

from ..nki import isa as nisa
from ..nki import jit
from ..nki import language as nl
from ..nki_op import nki_op
from . import checks
from .mode import eager_fast, simulating


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rotate_half_transposed(y: torch.Tensor) -> torch.Tensor:
    half = y.shape[-1] // 2
    return torch.cat((y[..., half:], -y[..., :half]), dim=-1)


def _per_head(t: torch.Tensor) -> torch.Tensor:
    """(batch, seq, d) or (seq, d) -> broadcastable over (batch, heads, seq, d)."""
    return t.unsqueeze(-3) if t.dim() == 3 else t


def rope_reference(q, k, cos, sin):
    """Plain PyTorch: transformers' apply_rotary_pos_emb (unsqueeze_dim=1)."""
    cos, sin = _per_head(cos), _per_head(sin)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


# ---- NKI kernel ------------------------------------------------------------------------------------

def _rotate_tile(x, n, d, sign_first, dtype):
    """cat(sign_first * x[:, d/2:], -sign_first * x[:, :d/2]) as a new SBUF tile."""
    half = d // 2
    rot = nl.ndarray((n, d), dtype=dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=rot[:, 0:half], data=x[:, half:d], op0=nl.multiply,
                       operand0=sign_first)
    nisa.tensor_scalar(dst=rot[:, half:d], data=x[:, 0:half], op0=nl.multiply,
                       operand0=-sign_first)
    return rot


def _rope_rows(out, x, cos, sin, heads, transposed):
    """out[bh] = rope(x[bh]) for x (batch*heads, seq, d), 128 positions a tile."""
    bh_count, seq, d = x.shape
    P = nl.tile_size.pmax
    for bh in nl.affine_range(bh_count):
        b = bh // heads
        for i in nl.affine_range(math.ceil(seq / P)):
            n = min(P, seq - i * P)
            xs = nl.load(x[bh, i * P:i * P + n, :])
            c = nl.load(cos[b, i * P:i * P + n, :])
            s = nl.load(sin[b, i * P:i * P + n, :])
            xc = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=xc, data1=xs, data2=c, op=nl.multiply)
            if transposed:  # g*cos + rotate_half^T(g*sin)
                gs = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=gs, data1=xs, data2=s, op=nl.multiply)
                term = _rotate_tile(gs, n, d, 1.0, nl.float32)
            else:  # x*cos + rotate_half(x)*sin
                rot = _rotate_tile(xs, n, d, -1.0, nl.float32)
                term = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=term, data1=rot, data2=s, op=nl.multiply)
            res = nl.ndarray((n, d), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=res, data1=xc, data2=term, op=nl.add)
            nl.store(out[bh, i * P:i * P + n, :], res)


@jit
def rope_kernel(q, k, cos, sin, transposed=False):
    """q (batch*heads, seq, d), k (batch*kv_heads, seq, d), cos/sin (batch, seq, d) -> the
    rotated q and k (or, with transposed=True, the gradients from upstream gradients q, k)."""
    batch = cos.shape[0]
    q_out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    k_out = nl.ndarray(k.shape, dtype=k.dtype, buffer=nl.shared_hbm)
    _rope_rows(q_out, q, cos, sin, q.shape[0] // batch, transposed)
    _rope_rows(k_out, k, cos, sin, k.shape[0] // batch, transposed)
    return q_out, k_out


# ---- the op ----------------------------------------------------------------------------------------

def _simulated(q, k, cos, sin, transposed):
    batch, seq, d = q.shape[0], q.shape[-2], q.shape[-1]
    cos3 = (cos if cos.dim() == 3 else cos.unsqueeze(0)).expand(batch, seq, d)
    sin3 = (sin if sin.dim() == 3 else sin.unsqueeze(0)).expand(batch, seq, d)
    dtype = torch.promote_types(q.dtype, cos.dtype)
    q_out, k_out = rope_kernel(q.to(dtype).reshape(-1, seq, d).contiguous(),
                               k.to(dtype).reshape(-1, seq, d).contiguous(),
                               cos3.contiguous(), sin3.contiguous(), transposed)
    return q_out.reshape(q.shape), k_out.reshape(k.shape)


def _composite(q, k, cos, sin, transposed):
    cos, sin = _per_head(cos), _per_head(sin)
    if transposed:
        return (q * cos + _rotate_half_transposed(q * sin),
                k * cos + _rotate_half_transposed(k * sin))
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


@nki_op("neuron_kernels::rope", autocast_dtype=None)
def rope_op(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            transposed: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if simulating() and q.numel() and k.numel():
        return _simulated(q, k, cos, sin, transposed)
    return _composite(q, k, cos, sin, transposed)


def _setup_context(ctx, inputs, output):
    q, k, cos, sin, transposed = inputs
    ctx.save_for_backward(cos, sin)
    ctx.transposed = transposed
    ctx.dtypes = (q.dtype, k.dtype)


def _backward(ctx, grad_q, grad_k):
    cos, sin = ctx.saved_tensors
    dq, dk = rope_op(grad_q, grad_k, cos, sin, not ctx.transposed)
    return dq.to(ctx.dtypes[0]), dk.to(ctx.dtypes[1]), None, None, None


rope_op.register_autograd(_backward, setup_context=_setup_context)


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """(q_rotated, k_rotated): q (batch, heads, seq, d), k (batch, kv_heads, seq, d), cos and
    sin (batch, seq, d) or (seq, d)."""
    checks.inputs("rope", q=q, k=k, cos=cos, sin=sin)
    checks.shape("rope", q.dim() == 4 and k.dim() == 4,
                 lambda: f"q {tuple(q.shape)} and k {tuple(k.shape)} must be (batch, heads, seq, "
                         "head_dim)")
    batch, _, seq, d = q.shape
    checks.shape("rope", d % 2 == 0, lambda: f"head_dim {d} must be even (rotate-half pairs halves)")
    checks.shape("rope", k.shape[0] == batch and k.shape[2:] == q.shape[2:],
                 lambda: f"k {tuple(k.shape)} must match q {tuple(q.shape)} in batch, seq and "
                         "head_dim")
    expected = ((batch, seq, d), (1, seq, d), (seq, d))
    for name, t in (("cos", cos), ("sin", sin)):
        checks.shape("rope", tuple(t.shape) in expected,
                     lambda name=name, t=t: f"{name} has shape {tuple(t.shape)}; expected (batch, "
                     f"seq, head_dim) = {expected[0]} or (seq, head_dim) = {expected[2]}")
        checks.shape("rope", not t.requires_grad,
                     lambda name=name: f"{name} requires grad; rope treats cos and sin as "
                     "constants (detach them)")
    if eager_fast():
        # The composite itself, whose autograd is the transposed rotation: the custom op's
        # dispatch costs more than the rotation at model sizes (measured).
        return _composite(q, k, cos, sin, False)
    return rope_op(q, k, cos, sin, False)
