"""Mixture-of-experts routing as Mixtral's router computes it:
    logits = x @ w_router.T,  probs = softmax(logits) in float32,
    scores, indices = top-k of probs,  scores /= scores.sum(-1)
returning (logits, scores, indices) in transformers' MixtralTopKRouter order.

The Vector Engine finds the k largest of a row 8 at a time: nisa.max8 gives a row's 8 largest
values, nisa.nc_match_replace8 their columns while knocking them out for the next 8 (rows with
fewer than 8 experts are padded with a value below every probability). The backward (indices carry none) goes through the normalisation and the
softmax: with s the selected probabilities and S their sum,
    dp[idx] = (dscore - sum(dscore * score)) / S,  dlogits = p * (dp - sum(dp * p)) + dlogits_out,
    dx = dlogits @ w_router,  dw_router = dlogits^T @ x.
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
from .matmul import matmul_into, matmul_kernel
from .mode import eager_fast, simulating

KNOCK_OUT = -3.0  # below every probability (>= 0): a chosen or padding column is never chosen
SEARCH_WIDTH = 8  # nisa.max8 and nc_match_replace8 search at least 8 elements per partition


def router_topk_reference(x, w_router, k):
    """Plain PyTorch: transformers' MixtralTopKRouter.forward."""
    logits = F.linear(x.reshape(-1, x.shape[-1]), w_router)
    probs = torch.softmax(logits.float(), dim=-1)
    scores, indices = torch.topk(probs, k, dim=-1)
    return logits, scores / scores.sum(dim=-1, keepdim=True), indices


# ---- NKI kernels ---------------------------------------------------------------------------------

@jit
def router_topk_kernel(x, w_router, k):
    """x (rows, hidden), w_router (experts, hidden) -> logits (rows, experts) in x's dtype,
    probs (rows, experts), scores (rows, k) float32, indices (rows, k) as float32."""
    rows, _ = x.shape
    experts = w_router.shape[0]
    P = nl.tile_size.pmax
    logits = nl.ndarray((rows, experts), dtype=x.dtype, buffer=nl.shared_hbm)
    probs_out = nl.ndarray((rows, experts), dtype=nl.float32, buffer=nl.shared_hbm)
    scores = nl.ndarray((rows, k), dtype=nl.float32, buffer=nl.shared_hbm)
    indices = nl.ndarray((rows, k), dtype=nl.float32, buffer=nl.shared_hbm)
    matmul_into(logits, [(x, w_router)], b_transposed=True)
    for i in nl.affine_range(math.ceil(rows / P)):
        r0, n = i * P, min(P, rows - i * P)
        z = nl.load(logits[r0:r0 + n, :])
        neg_max = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=z, axis=(1,), negate=True)
        e = nl.ndarray((n, experts), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=z, bias=neg_max, reduce_op=nl.add,
                        reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        inv_total = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_total, data=total)
        p = nl.ndarray((n, experts), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=p, data=e, op0=nl.multiply, operand0=inv_total)
        nl.store(probs_out[r0:r0 + n, :], p)
        width = max(experts, SEARCH_WIDTH)
        remaining = nl.ndarray((n, width), dtype=nl.float32, buffer=nl.sbuf)
        if width > experts:
            nisa.memset(dst=remaining[:, experts:width], value=KNOCK_OUT)
        nisa.tensor_copy(dst=remaining[:, 0:experts], src=p)
        top = nl.ndarray((n, k), dtype=nl.float32, buffer=nl.sbuf)
        top_ids = nl.ndarray((n, k), dtype=nl.float32, buffer=nl.sbuf)
        for c0 in nl.sequential_range(0, k, 8):
            take = min(8, k - c0)
            best = nl.ndarray((n, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.max8(dst=best, src=remaining)
            # their columns, and each chosen column knocked out of the next round
            where = nl.ndarray((n, 8), dtype=nl.uint32, buffer=nl.sbuf)
            nisa.nc_match_replace8(dst=remaining, data=remaining, vals=best, imm=KNOCK_OUT,
                                   dst_idx=where)
            nisa.tensor_copy(dst=top[:, c0:c0 + take], src=best[:, 0:take])
            nisa.tensor_copy(dst=top_ids[:, c0:c0 + take], src=where[:, 0:take])
        norm = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=norm, op=nl.add, data=top, axis=(1,))
        inv_norm = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_norm, data=norm)
        normed = nl.ndarray((n, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed, data=top, op0=nl.multiply, operand0=inv_norm)
        nl.store(scores[r0:r0 + n, :], normed)
        nl.store(indices[r0:r0 + n, :], top_ids)
    return logits, probs_out, scores, indices


@jit
def router_logits_grad_kernel(probs, dense_dp, d_logits_out):
    """The softmax backward per row: dlogits = p * (dp - sum(dp * p)) + dlogits_out, in the
    logits' dtype."""
    rows, experts = probs.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((rows, experts), dtype=d_logits_out.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(rows / P)):
        r0, n = i * P, min(P, rows - i * P)
        p, dp = nl.load(probs[r0:r0 + n, :]), nl.load(dense_dp[r0:r0 + n, :])
        prod = nl.ndarray((n, experts), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod, data1=dp, data2=p, op=nl.multiply)
        neg_dot = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_dot, op=nl.add, data=prod, axis=(1,), negate=True)
        centered = nl.ndarray((n, experts), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=centered, data=dp, op0=nl.add, operand0=neg_dot)
        grad = nl.ndarray((n, experts), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=grad, data1=centered, data2=p, op=nl.multiply)
        res = nl.ndarray((n, experts), dtype=out.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=res, data1=grad, data2=nl.load(d_logits_out[r0:r0 + n, :]),
                           op=nl.add)
        nl.store(out[r0:r0 + n, :], res)
    return out


@jit
def router_dense_dp_kernel(d_scores, scores, indices, probs):
    """d(loss)/d(probs) through the top-k selection and its normalisation, scattered dense:
    d_scores, scores and indices (rows, k) float32 (expert ids as floats), probs (rows, experts)
    -> (rows, experts) float32, 0 off the selected experts and at expert idx[r]
    (d_scores[r] - sum(d_scores * scores)) / S, S the selected probabilities' sum. The scatter is
    a one-hot per selected expert (an iota compare), as the engines have no scatter."""
    rows, k = scores.shape
    experts = probs.shape[1]
    P = nl.tile_size.pmax
    out = nl.ndarray((rows, experts), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(rows / P)):
        r0, n = i * P, min(P, rows - i * P)
        p = nl.load(probs[r0:r0 + n, :])
        ds, idx = nl.load(d_scores[r0:r0 + n, :]), nl.load(indices[r0:r0 + n, :])
        prod = nl.ndarray((n, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod, data1=ds, data2=nl.load(scores[r0:r0 + n, :]),
                           op=nl.multiply)
        neg_dot = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_dot, op=nl.add, data=prod, axis=(1,), negate=True)
        ids = nl.ndarray((n, experts), dtype=nl.float32, buffer=nl.sbuf)
        nisa.iota(dst=ids, pattern=[[1, experts]], offset=0)
        onehots = []
        total = nl.zeros((n, 1), dtype=nl.float32, buffer=nl.sbuf)  # S: the selected probs
        for r in nl.static_range(k):
            onehot = nl.ndarray((n, experts), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=onehot, data=ids, op0=nl.subtract, operand0=idx[:, r:r + 1],
                               op1=nl.equal, operand1=0.0)
            chosen = nl.ndarray((n, experts), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=chosen, data1=onehot, data2=p, op=nl.multiply)
            p_r = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=p_r, op=nl.add, data=chosen, axis=(1,))
            nisa.tensor_tensor(dst=total, data1=total, data2=p_r, op=nl.add)
            onehots.append(onehot)
        inv_total = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_total, data=total)
        dense = nl.zeros((n, experts), dtype=nl.float32, buffer=nl.sbuf)
        for r in nl.static_range(k):
            d_selected = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=d_selected, data=ds[:, r:r + 1], op0=nl.add, operand0=neg_dot,
                               op1=nl.multiply, operand1=inv_total)
            nisa.scalar_tensor_tensor(dst=dense, data=onehots[r], op0=nl.multiply,
                                      operand0=d_selected, op1=nl.add, operand1=dense)
        nl.store(out[r0:r0 + n, :], dense)
    return out


# ---- the ops -------------------------------------------------------------------------------------

@nki_op("neuron_kernels::router_topk", autocast_dtype=None)
def router_topk_op(x: torch.Tensor, w_router: torch.Tensor, k: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    x2d = x.reshape(-1, x.shape[-1])
    if simulating() and x2d.shape[0] > 0:
        logits, probs, scores, indices = router_topk_kernel(x2d.contiguous(),
                                                            w_router.contiguous(), k)
        return logits, scores, indices.long(), probs
    logits = F.linear(x2d, w_router)
    probs = torch.softmax(logits.float(), dim=-1)
    scores, indices = torch.topk(probs, k, dim=-1)
    return logits, scores / scores.sum(dim=-1, keepdim=True), indices, probs


def _dense_dp(d_scores, scores, indices, probs):
    """d(loss)/d(probs) through the top-k selection and its normalisation, scattered dense."""
    total = probs.gather(1, indices).sum(-1, keepdim=True)
    d_selected = (d_scores - (d_scores * scores).sum(-1, keepdim=True)) / total
    return torch.zeros_like(probs).scatter_(1, indices, d_selected)


@nki_op("neuron_kernels::router_topk_backward", autocast_dtype=None)
def router_topk_backward_op(d_logits_out: torch.Tensor, d_scores: torch.Tensor,
                            x: torch.Tensor, w_router: torch.Tensor, scores: torch.Tensor,
                            indices: torch.Tensor, probs: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    x2d = x.reshape(-1, x.shape[-1])
    if simulating() and x2d.shape[0] > 0:
        dense_dp = router_dense_dp_kernel(d_scores.float().contiguous(), scores.contiguous(),
                                          indices.float().contiguous(), probs.contiguous())
        d_logits = router_logits_grad_kernel(probs, dense_dp, d_logits_out.contiguous())
        dx = matmul_kernel(d_logits, w_router.contiguous())
        dw = matmul_kernel(d_logits, x2d.contiguous(), a_transposed=True)
    else:
        dense_dp = _dense_dp(d_scores.float(), scores, indices, probs)
        d_logits = (probs * (dense_dp - (dense_dp * probs).sum(-1, keepdim=True))
                    + d_logits_out.float()).to(d_logits_out.dtype)
        dx, dw = d_logits @ w_router, d_logits.t() @ x2d
    return dx.reshape(x.shape), dw


def _setup_context(ctx, inputs, output):
    x, w_router, _ = inputs
    _, scores, indices, probs = output
    ctx.save_for_backward(x, w_router, scores, indices, probs)
    ctx.mark_non_differentiable(indices)


def _backward(ctx, d_logits, d_scores, _d_indices, _d_probs):
    x, w_router, scores, indices, probs = ctx.saved_tensors
    dx, dw = router_topk_backward_op(d_logits, d_scores, x, w_router, scores, indices, probs)
    return dx, dw, None


router_topk_op.register_autograd(_backward, setup_context=_setup_context)


def router_topk(x: torch.Tensor, w_router: torch.Tensor, k: int):
    """(router_logits, scores, indices) for tokens x (..., hidden) and w_router (experts,
    hidden): the k most probable experts per token and their renormalised probabilities."""
    checks.inputs("router_topk", x=x, w_router=w_router)
    checks.shape("router_topk", w_router.dim() == 2 and x.dim() >= 1
                 and w_router.shape[1] == x.shape[-1] and w_router.dtype == x.dtype,
                 lambda: f"w_router {tuple(w_router.shape)} {w_router.dtype} must be (experts, "
                         f"{x.shape[-1] if x.dim() else '?'}) in x's dtype {x.dtype}")
    checks.shape("router_topk", isinstance(k, int) and 1 <= k <= w_router.shape[0],
                 lambda: f"k={k!r} must be an integer between 1 and the {w_router.shape[0]} "
                         "experts")
    if eager_fast():
        # The composite itself: with a handful of experts the op's backward has no pass to save
        # over autograd's, and its dispatch made routing 0.6-0.8x as fast at model sizes
        # (measured).
        return router_topk_reference(x, w_router, k)
    logits, scores, indices, _ = router_topk_op(x, w_router, k)
    return logits, scores, indices
