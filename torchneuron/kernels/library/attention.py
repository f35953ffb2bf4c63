"""Attention, softmax(q k^T * scale [causal]) v, with grouped-query heads, computed flash-style:
key/value tiles stream past each 128-query tile and an online softmax (running max m, running
sum l, rescaled accumulator) replaces the (seq x seq) score matrix, so memory grows linearly
with the sequence. The forward also returns the row log-sum-exp, lse = m + log(l), from which the
backward recomputes each tile's probabilities instead of storing them:
    p = exp(s - lse),  dv = p^T do,  dp = do v^T,  ds = p * (dp - rowsum(do * o)) * scale,
    dq = ds k,  dk = ds^T q;  k and v grads sum over the query heads that share them.

Shapes: q (batch, heads, q_seq, d), k and v (batch, kv_heads, kv_seq, d), heads a multiple of
kv_heads, d <= 128. `causal` masks key j for query i when j > i (top-left aligned, as
torch.nn.functional.scaled_dot_product_attention's is_causal).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..nki import isa as nisa
from ..nki import jit
from ..nki import language as nl
from ..nki_op import nki_op
from . import checks
from .mode import eager_fast, simulating
from .online_softmax import NEG_LARGE, log_sum_exp, online_softmax_step

Q_TILE, K_TILE = 128, 128

aten = torch.ops.aten


def attention_reference(q, k, v, causal=True, scale=None):
    """Plain PyTorch: the full score matrix, softmax in float32."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep.to(scores.device), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)


# ---- NKI kernels -------------------------------------------------------------------------------------

def _mask_causal(s, q0, k0, n_k):
    """Keeps s[p, f] where query q0 + p >= key k0 + f; the rest becomes NEG_LARGE."""
    nisa.affine_select(dst=s, pattern=[[-1, n_k]], offset=q0 - k0, channel_multiplier=1,
                       on_true_tile=s, on_false_value=NEG_LARGE, cmp_op=nl.greater_equal)


def _scores(q_t, k_rows, n_q, n_k, scale, causal, q0, k0):
    """s = (q k^T) * scale for one (query tile, key tile), float32 in SBUF; q_t is q^T (d, n_q)."""
    s_psum = nl.ndarray((n_q, n_k), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=s_psum, stationary=q_t, moving=nl.load_transpose2d(k_rows))
    s = nl.ndarray((n_q, n_k), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=s_psum, op0=nl.multiply, operand0=scale)
    if causal and k0 + n_k - 1 > q0:
        _mask_causal(s, q0, k0, n_k)
    return s


def _key_tiles(kv_seq, causal, q_last):
    """The key tiles a query tile whose last query is q_last attends to."""
    last = kv_seq - 1 if not causal else min(kv_seq - 1, q_last)
    return range(last // K_TILE + 1)


@jit
def attention_forward_kernel(q, k, v, scale, causal):
    """q (batch*heads, q_seq, d), k/v (batch*kv_heads, kv_seq, d) -> out like q, lse
    (batch*heads, q_seq, 1) float32."""
    bh_count, q_seq, d = q.shape
    kv_count, kv_seq, _ = k.shape
    group = bh_count // kv_count
    out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    lse = nl.ndarray((bh_count, q_seq, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for bh in nl.affine_range(bh_count):
        kv = bh // group
        for i in nl.affine_range(math.ceil(q_seq / Q_TILE)):
            q0, n_q = i * Q_TILE, min(Q_TILE, q_seq - i * Q_TILE)
            q_t = nl.load_transpose2d(q[bh, q0:q0 + n_q, :])
            m = nl.full((n_q, 1), NEG_LARGE, dtype=nl.float32, buffer=nl.sbuf)
            l = nl.zeros((n_q, 1), dtype=nl.float32, buffer=nl.sbuf)
            acc = nl.zeros((n_q, d), dtype=nl.float32, buffer=nl.sbuf)
            for j in nl.sequential_range(len(_key_tiles(kv_seq, causal, q0 + n_q - 1))):
                k0, n_k = j * K_TILE, min(K_TILE, kv_seq - j * K_TILE)
                s = _scores(q_t, k[kv, k0:k0 + n_k, :], n_q, n_k, scale, causal, q0, k0)
                m_new, p, alpha = online_softmax_step(s, m, l)
                # p^T on the Tensor Engine, then p @ v accumulates the tile's share.
                p_low = nl.ndarray((n_q, n_k), dtype=v.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=p_low, src=p)
                p_t_psum = nl.ndarray((n_k, n_q), dtype=v.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=p_t_psum, data=p_low)
                p_t = nl.ndarray((n_k, n_q), dtype=v.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=p_t, src=p_t_psum)
                pv = nl.ndarray((n_q, d), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=pv, stationary=p_t, moving=nl.load(v[kv, k0:k0 + n_k, :]))
                nisa.scalar_tensor_tensor(dst=acc, data=acc, op0=nl.multiply, operand0=alpha,
                                          op1=nl.add, operand1=pv)
                m = m_new
            inv_l = nl.ndarray((n_q, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.reciprocal(dst=inv_l, data=l)
            res = nl.ndarray((n_q, d), dtype=q.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=res, data=acc, op0=nl.multiply, operand0=inv_l)
            nl.store(out[bh, q0:q0 + n_q, :], res)
            nl.store(lse[bh, q0:q0 + n_q, :], log_sum_exp(m, l))
    return out, lse


@jit
def attention_backward_kernel(grad, q, k, v, out, lse, scale, causal):
    """-> dq like q, dk and dv like k and v (summed over each kv head's query heads). Outer loop
    over key tiles (dk, dv accumulate in SBUF), inner over the query tiles that see them (dq
    accumulates in SBUF across key tiles)."""
    bh_count, q_seq, d = q.shape
    kv_count, kv_seq, _ = k.shape
    group = bh_count // kv_count
    dq = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    dk = nl.ndarray(k.shape, dtype=k.dtype, buffer=nl.shared_hbm)
    dv = nl.ndarray(v.shape, dtype=v.dtype, buffer=nl.shared_hbm)
    q_tiles = math.ceil(q_seq / Q_TILE)
    for kv in nl.affine_range(kv_count):
        dq_acc = [[nl.zeros((min(Q_TILE, q_seq - i * Q_TILE), d), dtype=nl.float32,
                            buffer=nl.sbuf) for i in range(q_tiles)] for _ in range(group)]
        for j in nl.affine_range(math.ceil(kv_seq / K_TILE)):
            k0, n_k = j * K_TILE, min(K_TILE, kv_seq - j * K_TILE)
            k_rows = nl.load(k[kv, k0:k0 + n_k, :])
            v_t = nl.load_transpose2d(v[kv, k0:k0 + n_k, :])
            dk_acc = nl.zeros((n_k, d), dtype=nl.float32, buffer=nl.sbuf)
            dv_acc = nl.zeros((n_k, d), dtype=nl.float32, buffer=nl.sbuf)
            for h in nl.affine_range(group):
                bh = kv * group + h
                for i in nl.sequential_range(q_tiles):
                    q0, n_q = i * Q_TILE, min(Q_TILE, q_seq - i * Q_TILE)
                    if causal and k0 > q0 + n_q - 1:
                        continue  # every query of this tile precedes every key of that one
                    rows = slice(q0, q0 + n_q)
                    s = _scores(nl.load_transpose2d(q[bh, rows, :]), k[kv, k0:k0 + n_k, :],
                                n_q, n_k, scale, causal, q0, k0)
                    neg_lse = nl.ndarray((n_q, 1), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_scalar(dst=neg_lse, data=nl.load(lse[bh, rows, :]),
                                       op0=nl.multiply, operand0=-1.0)
                    p = nl.ndarray((n_q, n_k), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.activation(dst=p, op=nl.exp, data=s, bias=neg_lse)
                    g = nl.load(grad[bh, rows, :])
                    # delta = rowsum(do * o): the softmax backward's per-row term
                    g_o = nl.ndarray((n_q, d), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_tensor(dst=g_o, data1=g, data2=nl.load(out[bh, rows, :]),
                                       op=nl.multiply)
                    neg_delta = nl.ndarray((n_q, 1), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_reduce(dst=neg_delta, op=nl.add, data=g_o, axis=(1,),
                                       negate=True)
                    # dv += p^T @ do (p is already (queries, keys): the stationary layout)
                    p_low = nl.ndarray((n_q, n_k), dtype=grad.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=p_low, src=p)
                    dv_part = nl.ndarray((n_k, d), dtype=nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=dv_part, stationary=p_low, moving=g)
                    nisa.tensor_tensor(dst=dv_acc, data1=dv_acc, data2=dv_part, op=nl.add)
                    # dp = do @ v^T; ds = p * (dp - delta) * scale
                    dp = nl.ndarray((n_q, n_k), dtype=nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=dp, stationary=nl.load_transpose2d(grad[bh, rows, :]),
                                   moving=v_t)
                    centered = nl.ndarray((n_q, n_k), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_scalar(dst=centered, data=dp, op0=nl.add, operand0=neg_delta,
                                       op1=nl.multiply, operand1=scale)
                    ds = nl.ndarray((n_q, n_k), dtype=q.dtype, buffer=nl.sbuf)
                    nisa.tensor_tensor(dst=ds, data1=centered, data2=p, op=nl.multiply)
                    # dk += ds^T @ q
                    dk_part = nl.ndarray((n_k, d), dtype=nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=dk_part, stationary=ds, moving=nl.load(q[bh, rows, :]))
                    nisa.tensor_tensor(dst=dk_acc, data1=dk_acc, data2=dk_part, op=nl.add)
                    # dq += ds @ k (ds^T through the Tensor Engine's transpose)
                    ds_t_psum = nl.ndarray((n_k, n_q), dtype=q.dtype, buffer=nl.psum)
                    nisa.nc_transpose(dst=ds_t_psum, data=ds)
                    ds_t = nl.ndarray((n_k, n_q), dtype=q.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=ds_t, src=ds_t_psum)
                    dq_part = nl.ndarray((n_q, d), dtype=nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=dq_part, stationary=ds_t, moving=k_rows)
                    nisa.tensor_tensor(dst=dq_acc[h][i], data1=dq_acc[h][i], data2=dq_part,
                                       op=nl.add)
            for name, acc, target in (("dk", dk_acc, dk), ("dv", dv_acc, dv)):
                res = nl.ndarray((n_k, d), dtype=target.dtype, buffer=nl.sbuf, name=name)
                nisa.tensor_copy(dst=res, src=acc)
                nl.store(target[kv, k0:k0 + n_k, :], res)
        for h in nl.affine_range(group):
            for i in nl.affine_range(q_tiles):
                q0, n_q = i * Q_TILE, min(Q_TILE, q_seq - i * Q_TILE)
                res = nl.ndarray((n_q, d), dtype=q.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=res, src=dq_acc[h][i])
                nl.store(dq[kv * group + h, q0:q0 + n_q, :], res)
    return dq, dk, dv


# ---- fast path: the CPU's flash attention kernels on the device -------------------------------------

def _expand_heads(t, group):
    return t if group == 1 else t.repeat_interleave(group, dim=1)


def _forward_fast(q, k, v, scale, causal):
    group = q.shape[1] // k.shape[1]
    # internal: see runtime/torch_internals.py "aten._scaled_dot_product_flash_attention_for_cpu"
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(
        q, _expand_heads(k, group), _expand_heads(v, group), 0.0, causal, scale=scale)
    return out, lse.unsqueeze(-1)


def _backward_fast(grad, q, k, v, out, lse, scale, causal):
    group = q.shape[1] // k.shape[1]
    # internal: see runtime/torch_internals.py "aten._scaled_dot_product_flash_attention_for_cpu"
    dq, dk, dv = aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad, q, _expand_heads(k, group), _expand_heads(v, group), out, lse.squeeze(-1), 0.0,
        causal, scale=scale)
    if group > 1:
        b, h, s, d = dk.shape
        dk = dk.reshape(b, h // group, group, s, d).sum(2)
        dv = dv.reshape(b, h // group, group, s, d).sum(2)
    return dq, dk, dv


# ---- the ops ---------------------------------------------------------------------------------------

def _flat(t):
    return t.reshape(-1, t.shape[-2], t.shape[-1]).contiguous()


@nki_op("neuron_kernels::attention", autocast_dtype=None)
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                 causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if simulating():
        out, lse = attention_forward_kernel(_flat(q), _flat(k), _flat(v), scale, causal)
        return out.reshape(q.shape), lse.reshape(*q.shape[:-1], 1)
    return _forward_fast(q, k, v, scale, causal)


@nki_op("neuron_kernels::attention_backward", autocast_dtype=None)
def attention_backward_op(grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          out: torch.Tensor, lse: torch.Tensor, scale: float, causal: bool
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if simulating():
        dq, dk, dv = attention_backward_kernel(_flat(grad), _flat(q), _flat(k), _flat(v),
                                               _flat(out), _flat(lse), scale, causal)
        return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
    return _backward_fast(grad.contiguous(), q, k, v, out, lse, scale, causal)


def _setup_context(ctx, inputs, output):
    q, k, v, scale, causal = inputs
    ctx.save_for_backward(q, k, v, *output)
    ctx.scale, ctx.causal = scale, causal


def _backward(ctx, grad, _grad_lse):
    dq, dk, dv = attention_backward_op(grad, *ctx.saved_tensors, ctx.scale, ctx.causal)
    return dq, dk, dv, None, None


attention_op.register_autograd(_backward, setup_context=_setup_context)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
              scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * scale) v per head; q (batch, heads, q_seq, d), k and v (batch, kv_heads,
    kv_seq, d); scale defaults to 1/sqrt(d)."""
    checks.inputs("attention", q=q, k=k, v=v)
    checks.shape("attention", q.dim() == 4 and k.dim() == 4 and v.dim() == 4,
                 lambda: f"q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} must be "
                         "(batch, heads, seq, head_dim)")
    checks.shape("attention", q.dtype == k.dtype == v.dtype,
                 lambda: f"q, k and v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    checks.shape("attention", k.shape == v.shape and k.shape[0] == q.shape[0]
                 and k.shape[-1] == q.shape[-1],
                 lambda: f"k {tuple(k.shape)} and v {tuple(v.shape)} must be equal and match q "
                         f"{tuple(q.shape)} in batch and head_dim")
    checks.shape("attention", k.shape[1] > 0 and q.shape[1] % k.shape[1] == 0,
                 lambda: f"q's {q.shape[1]} heads must be a multiple of k's {k.shape[1]} "
                         "(grouped-query attention)")
    checks.shape("attention", q.shape[-1] <= 128,
                 lambda: f"head_dim {q.shape[-1]} exceeds 128, the Tensor Engine's contraction")
    checks.shape("attention", q.shape[-2] > 0 and k.shape[-2] > 0,
                 lambda: f"empty sequence: q {tuple(q.shape)}, k {tuple(k.shape)}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if eager_fast():
        # scaled_dot_product_attention picks the same CPU flash kernels on neuron (grouped-query
        # heads included) and differentiates them itself; the op's dispatch would only add
        # its cost (0.4x at a tiny Llama's sizes, measured).
        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=scale,
                                              enable_gqa=True)
    return attention_op(q, k, v, scale, bool(causal))[0]
