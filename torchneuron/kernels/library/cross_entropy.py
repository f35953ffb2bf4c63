"""Cross-entropy over a large vocabulary without the full softmax.

`cross_entropy(logits, target)` takes logits (rows, vocab); `cross_entropy(hidden, target,
weight=lm_head.weight)` takes the last hidden states (rows, hidden) and the output projection
(vocab, hidden), and never holds more than one (rows, chunk) block of logits: the loss of a
language model without its (tokens x vocab) logits tensor.

Both walk the vocabulary in chunks: each chunk gives each row its log-sum-exp and, where the
row's target falls in the chunk, the target's logit; chunks merge with logaddexp (an online
logsumexp). Loss per row = lse - logit[target]; rows whose target is `ignore_index` count
neither in the sum nor in the mean. The backward revisits the chunks:
dlogits = (exp(logits - lse) - onehot(target)) * dloss_row, and for the hidden form
dhidden = sum over chunks of dlogits @ W_chunk, dW_chunk = dlogits^T @ hidden.
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
from .matmul import matmul_kernel
from .mode import eager_fast, simulating
from .online_softmax import NEG_LARGE, log_sum_exp, online_softmax_step

CHUNK = 16384  # vocabulary columns per chunk: the largest (rows, chunk) block ever held
SUB_CHUNK = 512  # columns per SBUF tile inside a chunk kernel


def cross_entropy_reference(logits_or_hidden, target, weight=None, ignore_index=-100,
                            reduction="mean"):
    """Plain PyTorch: the full logits, F.cross_entropy in float32."""
    logits = logits_or_hidden if weight is None else logits_or_hidden @ weight.T
    return F.cross_entropy(logits.float(), target, ignore_index=ignore_index,
                           reduction=reduction)


# ---- NKI kernels --------------------------------------------------------------------------------

@jit
def chunk_stats_kernel(logits, target, offset):
    """logits (rows, cols) of vocabulary columns offset.., target (rows, 1) float32 -> the rows'
    log-sum-exp over these columns and their target's logit where it lies here (else 0), both
    (rows, 1) float32. An online max/sum over SUB_CHUNK-column tiles."""
    rows, cols = logits.shape
    P = nl.tile_size.pmax
    lse = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    picked = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(rows / P)):
        r0, n = i * P, min(P, rows - i * P)
        t = nl.load(target[r0:r0 + n, :])
        m = nl.full((n, 1), NEG_LARGE, dtype=nl.float32, buffer=nl.sbuf)
        s = nl.zeros((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        pick = nl.full((n, 1), NEG_LARGE, dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.sequential_range(math.ceil(cols / SUB_CHUNK)):
            c0, w = j * SUB_CHUNK, min(SUB_CHUNK, cols - j * SUB_CHUNK)
            x = nl.load(logits[r0:r0 + n, c0:c0 + w])
            m_new, _, _ = online_softmax_step(x, m, s)
            m = m_new
            # the target's logit: the one column whose index t <= id <= t keeps its value, the
            # others become NEG_LARGE, and the row max is the logit (or NEG_LARGE: not here)
            kept = nl.ndarray((n, w), dtype=nl.float32, buffer=nl.sbuf)
            found = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.range_select(dst=kept, on_true_tile=x, comp_op0=nl.greater_equal,
                              comp_op1=nl.less_equal, bound0=t, bound1=t, reduce_res=found,
                              reduce_cmd=nisa.reduce_cmd.reset_reduce, range_start=offset + c0,
                              on_false_value=NEG_LARGE)
            nisa.tensor_tensor(dst=pick, data1=pick, data2=found, op=nl.maximum)
        nl.store(lse[r0:r0 + n, :], log_sum_exp(m, s))
        # 0 where the target lies in another chunk: pick * (pick > NEG_LARGE / 2)
        here = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=here, data=pick, op0=nl.greater, operand0=NEG_LARGE / 2)
        nisa.tensor_tensor(dst=pick, data1=pick, data2=here, op=nl.multiply)
        nl.store(picked[r0:r0 + n, :], pick)
    return lse, picked


@jit
def chunk_grad_kernel(logits, lse, target, row_grad, offset):
    """dlogits = (exp(logits - lse) - onehot(target)) * row_grad for one chunk of columns."""
    rows, cols = logits.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((rows, cols), dtype=logits.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(rows / P)):
        r0, n = i * P, min(P, rows - i * P)
        neg_lse = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg_lse, data=nl.load(lse[r0:r0 + n, :]), op0=nl.multiply,
                           operand0=-1.0)
        t, g = nl.load(target[r0:r0 + n, :]), nl.load(row_grad[r0:r0 + n, :])
        for j in nl.affine_range(math.ceil(cols / SUB_CHUNK)):
            c0, w = j * SUB_CHUNK, min(SUB_CHUNK, cols - j * SUB_CHUNK)
            prob = nl.ndarray((n, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=prob, op=nl.exp, data=nl.load(logits[r0:r0 + n, c0:c0 + w]),
                            bias=neg_lse)
            ids = nl.ndarray((n, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.iota(dst=ids, pattern=[[1, w]], offset=offset + c0)
            onehot = nl.ndarray((n, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=onehot, data=ids, op0=nl.subtract, operand0=t,
                               op1=nl.equal, operand1=0.0)
            diff = nl.ndarray((n, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=diff, data1=prob, data2=onehot, op=nl.subtract)
            res = nl.ndarray((n, w), dtype=logits.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=res, data=diff, op0=nl.multiply, operand0=g)
            nl.store(out[r0:r0 + n, c0:c0 + w], res)
    return out


@jit
def merge_stats_kernel(lse, picked, chunk_lse, chunk_picked):
    """Folds one chunk's statistics into the running ones, all (rows, 1) float32:
    lse' = logaddexp(lse, chunk_lse) = m + log(exp(lse - m) + exp(chunk_lse - m)) with
    m = max(lse, chunk_lse), and picked' = picked + chunk_picked (the target lies in one chunk,
    the others add 0)."""
    rows = lse.shape[0]
    P = nl.tile_size.pmax
    lse_out = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    picked_out = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(rows / P)):
        r0, n = i * P, min(P, rows - i * P)
        a, b = nl.load(lse[r0:r0 + n, :]), nl.load(chunk_lse[r0:r0 + n, :])
        m = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=m, data1=a, data2=b, op=nl.maximum)
        neg_m = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg_m, data=m, op0=nl.multiply, operand0=-1.0)
        exp_a = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=exp_a, op=nl.exp, data=a, bias=neg_m)
        exp_b = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=exp_b, op=nl.exp, data=b, bias=neg_m)
        total = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=total, data1=exp_a, data2=exp_b, op=nl.add)
        log_total = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=log_total, op=nl.log, data=total)
        merged = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=merged, data1=log_total, data2=m, op=nl.add)
        nl.store(lse_out[r0:r0 + n, :], merged)
        both = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=both, data1=nl.load(picked[r0:r0 + n, :]),
                           data2=nl.load(chunk_picked[r0:r0 + n, :]), op=nl.add)
        nl.store(picked_out[r0:r0 + n, :], both)
    return lse_out, picked_out


@jit
def loss_reduction_kernel(lse, picked, valid, mean):
    """-> losses (rows, 1) = (lse - picked) * valid, and the loss (1, 1): their sum, divided by
    the count of valid rows when `mean` (0/0 = nan when every row is ignored, as
    F.cross_entropy). Sums across partitions on GpSimd, accumulated over row tiles in SBUF."""
    rows = lse.shape[0]
    P = nl.tile_size.pmax
    losses = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    loss = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    sums = nl.zeros((1, 2), dtype=nl.float32, buffer=nl.sbuf)  # [sum of losses, valid rows]
    for i in nl.affine_range(math.ceil(rows / P)):
        r0, n = i * P, min(P, rows - i * P)
        v = nl.load(valid[r0:r0 + n, :])
        diff = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=diff, data1=nl.load(lse[r0:r0 + n, :]),
                           data2=nl.load(picked[r0:r0 + n, :]), op=nl.subtract)
        pair = nl.ndarray((n, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=pair[:, 0:1], data1=diff, data2=v, op=nl.multiply)
        nisa.tensor_copy(dst=pair[:, 1:2], src=v)
        nl.store(losses[r0:r0 + n, :], pair[:, 0:1])
        tile_sums = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=tile_sums, op=nl.add, data=pair)
        nisa.tensor_tensor(dst=sums, data1=sums, data2=tile_sums, op=nl.add)
    result = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    if mean:
        inv_count = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_count, data=sums[:, 1:2])
        nisa.tensor_tensor(dst=result, data1=sums[:, 0:1], data2=inv_count, op=nl.multiply)
    else:
        nisa.tensor_copy(dst=result, src=sums[:, 0:1])
    nl.store(loss, result)
    return losses, loss


# ---- chunk steps: NKI kernels when simulating, composite ops otherwise ---------------------------

def _chunk_logits(x, weight, c0, c1):
    if weight is None:
        return x[:, c0:c1]
    if simulating():
        return matmul_kernel(x.contiguous(), weight[c0:c1].contiguous(), b_transposed=True)
    return x @ weight[c0:c1].T


def _chunk_stats(logits, target_f, c0):
    if simulating():
        return chunk_stats_kernel(logits.contiguous(), target_f, c0)
    # log_softmax is one fused CPU kernel on the device, where logsumexp decomposes into five
    # passes: lse = x_0 - log_softmax(x)_0
    x = logits.float()
    lse = x[:, :1] - torch.log_softmax(x, dim=-1)[:, :1]
    inside = (target_f >= c0) & (target_f < c0 + logits.shape[1])
    index = (target_f - c0).clamp(0, logits.shape[1] - 1).long()
    return lse, torch.where(inside, logits.gather(1, index).float(), 0.0)


def _chunk_grad(logits, lse, target_f, row_grad, c0, vocab):
    if simulating():
        return chunk_grad_kernel(logits.contiguous(), lse, target_f, row_grad, c0)
    # softmax * row_grad, then -row_grad at each row's target where it lies in this chunk: a
    # scatter of one value per row instead of a (rows, chunk) one-hot
    x = logits.float()
    whole = c0 == 0 and x.shape[1] == vocab  # one chunk: the fused softmax kernel is exact
    grad = (torch.softmax(x, dim=-1) if whole else (x - lse).exp_()).mul_(row_grad)
    cols = logits.shape[1]
    inside = (target_f >= c0) & (target_f < c0 + cols)
    index = (target_f - c0).clamp(0, cols - 1).long()
    grad.scatter_add_(1, index, torch.where(inside, -row_grad, 0.0))
    return grad.to(logits.dtype)


def _vocab(x, weight):
    return x.shape[1] if weight is None else weight.shape[0]


def _row_losses(x, weight, target_f):
    """(rows, 1) lse and picked target logits, chunk by chunk."""
    lse, picked = None, None
    vocab = _vocab(x, weight)
    for c0 in range(0, vocab, CHUNK):
        c_lse, c_pick = _chunk_stats(_chunk_logits(x, weight, c0, min(vocab, c0 + CHUNK)),
                                     target_f, c0)
        if lse is None:
            lse, picked = c_lse, c_pick
        elif simulating():
            lse, picked = merge_stats_kernel(lse, picked, c_lse, c_pick)
        else:
            lse, picked = torch.logaddexp(lse, c_lse), picked + c_pick
    return lse, picked


def _reduce_losses(lse, picked, target, ignore_index, reduction):
    """The rows' losses, ignored rows 0, then their sum or mean (reduction 'none': the rows')."""
    valid = (target != ignore_index).float().unsqueeze(1)
    if simulating() and target.numel():
        losses, loss = loss_reduction_kernel(lse.contiguous(), picked.contiguous(), valid,
                                             reduction == "mean")
        return losses.squeeze(1) if reduction == "none" else loss.reshape(())
    losses = (lse - picked) * valid
    if reduction == "none":
        return losses.squeeze(1)
    loss = losses.sum()
    return loss / valid.sum() if reduction == "mean" else loss


def _row_weights(target, ignore_index, reduction):
    """d(loss)/d(row loss): 1 (sum), 1/count (mean), 0 for ignored rows."""
    valid = (target != ignore_index).float().unsqueeze(1)
    if reduction == "mean":
        return valid / valid.sum().clamp(min=1.0)  # all rows ignored: loss 0/0 -> nan below
    return valid


# ---- the ops -------------------------------------------------------------------------------------

def _weight_or_none(weight):
    """An empty placeholder stands for a missing weight in the op's schema (autograd saves
    tensors, not Nones)."""
    return None if weight.numel() == 0 else weight


@nki_op("neuron_kernels::cross_entropy", autocast_dtype=None)
def cross_entropy_op(x: torch.Tensor, target: torch.Tensor, weight: torch.Tensor,
                     ignore_index: int, reduction: str) -> tuple[torch.Tensor, torch.Tensor]:
    w = _weight_or_none(weight)
    target_f = target.float().unsqueeze(1)
    lse, picked = _row_losses(x, w, target_f)
    return _reduce_losses(lse, picked, target, ignore_index, reduction), lse


@nki_op("neuron_kernels::cross_entropy_backward", autocast_dtype=None)
def cross_entropy_backward_op(grad: torch.Tensor, x: torch.Tensor, target: torch.Tensor,
                              weight: torch.Tensor, lse: torch.Tensor, ignore_index: int,
                              reduction: str) -> tuple[torch.Tensor, torch.Tensor]:
    w = _weight_or_none(weight)
    target_f = target.float().unsqueeze(1)
    row_grad = _row_weights(target, ignore_index, reduction) * (
        grad.reshape(-1, 1) if reduction == "none" else grad)
    vocab = _vocab(x, w)
    dx = torch.zeros(x.shape, dtype=torch.float32, device=x.device) if w is not None else \
        torch.empty_like(x)
    dw = torch.zeros(weight.shape, dtype=torch.float32, device=x.device)
    for c0 in range(0, vocab, CHUNK):
        c1 = min(vocab, c0 + CHUNK)
        d_logits = _chunk_grad(_chunk_logits(x, w, c0, c1), lse, target_f,
                               row_grad.float().contiguous(), c0, vocab)
        if w is None:
            dx[:, c0:c1] = d_logits
        elif simulating():
            dx += matmul_kernel(d_logits, w[c0:c1].contiguous(), out_dtype=torch.float32)
            dw[c0:c1] = matmul_kernel(d_logits, x.contiguous(), a_transposed=True,
                                      out_dtype=torch.float32)
        else:
            dx += (d_logits @ w[c0:c1]).float()
            dw[c0:c1] = (d_logits.t() @ x).float()
    return dx.to(x.dtype), dw.to(weight.dtype)


def _setup_context(ctx, inputs, output):
    x, target, weight, ignore_index, reduction = inputs
    ctx.save_for_backward(x, target, weight, output[1])
    ctx.ignore_index, ctx.reduction = ignore_index, reduction


def _backward(ctx, grad, _grad_lse):
    x, target, weight, lse = ctx.saved_tensors
    dx, dw = cross_entropy_backward_op(grad, x, target, weight, lse, ctx.ignore_index,
                                       ctx.reduction)
    return dx, None, dw, None, None


cross_entropy_op.register_autograd(_backward, setup_context=_setup_context)


# ---- eager: the composite from logits; from hidden states, the gradient in the forward ---------

# Logits (rows x vocab) below which the hidden form's eager path is the composite itself: its
# few megabytes of logits cost less than a Python autograd.Function's fixed cost and block loop
# (0.5x at a tiny Llama's 24 x 96, measured).
HIDDEN_FUNCTION_MIN_LOGITS = 1 << 20


def _row_block(rows: int, vocab: int) -> int:
    """Rows per block of the hidden form's eager path: a (block, vocab) block of logits holds no
    more than the chunked op's (rows, CHUNK) block."""
    return max(1, rows * CHUNK // max(vocab, 1))


class _HiddenCrossEntropy(torch.autograd.Function):
    """The loss from hidden states, a block of rows at a time with the whole vocabulary. A scalar
    loss's gradient is the upstream gradient times a fixed tensor, so each block's softmax turns
    into its share of dhidden and dweight while the block's logits are at hand (as Liger-Kernel's
    fused linear cross-entropy does): three matrix products, as many as the composite's, where
    recomputing the logits in the backward costs a fourth. Only for reduction 'mean' or 'sum'."""

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, reduction, grad_enabled):
        rows, vocab = x.shape[0], weight.shape[0]
        want_dx = grad_enabled and ctx.needs_input_grad[0]
        want_dw = grad_enabled and ctx.needs_input_grad[2]
        row_w = _row_weights(target, ignore_index, reduction)
        index = target.clamp(0, max(vocab - 1, 0)).unsqueeze(1)  # ignored rows weigh 0
        dx = torch.empty(x.shape, dtype=torch.float32, device=x.device) if want_dx else None
        dw = torch.zeros(weight.shape, dtype=torch.float32, device=x.device) if want_dw else None
        picked = torch.empty(rows, 1, dtype=torch.float32, device=x.device)
        step = _row_block(rows, vocab)
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            xs = x[r0:r1]
            log_p = torch.log_softmax((xs @ weight.T).float(), dim=-1)
            picked[r0:r1] = log_p.gather(1, index[r0:r1])
            if not (want_dx or want_dw):
                continue
            w_rows = row_w[r0:r1]
            d_logits = log_p.exp_().mul_(w_rows)  # softmax * d(loss)/d(row loss)
            d_logits.scatter_add_(1, index[r0:r1], -w_rows)  # minus the one-hot target
            d_logits = d_logits.to(x.dtype)
            del log_p
            if want_dx:
                dx[r0:r1] = d_logits @ weight
            if want_dw:
                dw += d_logits.t() @ xs
        ctx.save_for_backward(dx.to(x.dtype) if want_dx else None,
                              dw.to(weight.dtype) if want_dw else None)
        loss = -(picked.squeeze(1) * (target != ignore_index)).sum()
        return loss / (target != ignore_index).sum() if reduction == "mean" else loss

    @staticmethod
    def backward(ctx, grad):
        dx, dw = ctx.saved_tensors
        return (None if dx is None else dx * grad.to(dx.dtype), None,
                None if dw is None else dw * grad.to(dw.dtype), None, None, None)


def _eager(x, target, weight, ignore_index, reduction):
    """The fast path without the custom operator, or None where the op must run."""
    if weight is None:
        # F.cross_entropy on the float logits, the composite itself: log_softmax and its
        # backward are single fused passes on the device, faster than the op's chunks even at
        # 2048 x 32000 (0.6-0.7x, measured), which save memory that the logits already cost.
        return F.cross_entropy(x.float(), target, ignore_index=ignore_index,
                               reduction=reduction)
    if x.shape[0] * weight.shape[0] < HIDDEN_FUNCTION_MIN_LOGITS:
        return cross_entropy_reference(x, target, weight, ignore_index, reduction)
    if reduction == "none":
        return None  # per-row upstream gradients: the op's chunks recompute the logits
    return _HiddenCrossEntropy.apply(x, target, weight, ignore_index, reduction,
                                     torch.is_grad_enabled())


def cross_entropy(logits_or_hidden: torch.Tensor, target: torch.Tensor,
                  weight: torch.Tensor | None = None, ignore_index: int = -100,
                  reduction: str = "mean") -> torch.Tensor:
    """The cross-entropy loss of logits (rows, vocab), or of hidden states (rows, hidden) times
    `weight` (vocab, hidden) without materializing the logits; `target` (rows,) class ids."""
    x = logits_or_hidden
    if weight is None:
        checks.inputs("cross_entropy", ("target", target), logits_or_hidden=x)
    else:
        checks.inputs("cross_entropy", ("target", target), logits_or_hidden=x, weight=weight)
    checks.shape("cross_entropy", reduction in ("mean", "sum", "none"),
                 lambda: f"reduction={reduction!r}; expected 'mean', 'sum' or 'none'")
    checks.shape("cross_entropy", x.dim() == 2 and target.dim() == 1
                 and target.shape[0] == x.shape[0],
                 lambda: f"expected logits_or_hidden (rows, features) and target (rows,); got "
                         f"{tuple(x.shape)} and {tuple(target.shape)} (flatten batch and "
                         "sequence first)")
    if target.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"torchneuron.kernels.cross_entropy: target has dtype {target.dtype}; "
                        "expected integer class ids (int64)")
    if weight is not None:
        checks.shape("cross_entropy", weight.dim() == 2 and weight.shape[1] == x.shape[1]
                     and weight.dtype == x.dtype,
                     lambda: f"weight {tuple(weight.shape)} {weight.dtype} must be (vocab, "
                             f"{x.shape[1]}) in hidden's dtype {x.dtype}")
    if eager_fast():
        loss = _eager(x, target.long(), weight, int(ignore_index), reduction)
        if loss is not None:
            return loss
    placeholder = weight if weight is not None else x.new_empty(0)
    return cross_entropy_op(x, target.long(), placeholder, int(ignore_index), reduction)[0]
