"""RMSNorm: y = weight * (x / sqrt(mean(x^2) + eps)), with Hugging Face Llama's rounding (the
normalised x is cast back to x's dtype before the weight multiplies it).

The forward op also returns rstd = 1/sqrt(mean(x^2) + eps) in float32, one per row, which the
backward reuses instead of recomputing the reduction:
    dx = rstd * (g*w - xhat * mean(g*w * xhat)),   dw = sum over rows of g * xhat.
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


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Plain PyTorch, as transformers' LlamaRMSNorm computes it."""
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


# ---- NKI kernels ---------------------------------------------------------------------------------

@jit
def rms_norm_kernel(x, weight, eps):
    """x (rows, d), weight (d,) -> out (rows, d), rstd (rows, 1) float32. 128 rows a tile (the
    last may be partial); the sum of squares comes from the activation's reduction registers."""
    rows, d = x.shape
    P = nl.tile_size.pmax
    out_dtype = nl.float32 if nl.float32 in (x.dtype, weight.dtype) else x.dtype
    out = nl.ndarray((rows, d), dtype=out_dtype, buffer=nl.shared_hbm)
    rstd_out = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    w_sb = nl.load(weight.reshape((1, d)).broadcast(0, P))
    for i in nl.affine_range(math.ceil(rows / P)):
        n = min(P, rows - i * P)
        xs = nl.load(x[i * P:i * P + n, :])
        squares = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.sbuf)
        sum_sq = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=squares, op=nl.square, data=xs, reduce_op=nl.add, reduce_res=sum_sq,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        rstd = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=sum_sq, scale=1.0 / d, bias=eps)
        normed = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.sbuf)  # HF's cast back
        nisa.tensor_scalar(dst=normed, data=xs, op0=nl.multiply, operand0=rstd)
        res = nl.ndarray((n, d), dtype=out_dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=res, data1=normed, data2=w_sb[0:n, :], op=nl.multiply)
        nl.store(out[i * P:i * P + n, :], res)
        nl.store(rstd_out[i * P:i * P + n, :], rstd)
    return out, rstd_out


@jit
def rms_norm_backward_kernel(grad, x, weight, rstd):
    """-> dx (rows, d) in x's dtype, dw (1, d) float32 (summed over rows on GpSimd's partition
    reduction, accumulated across row tiles in SBUF)."""
    rows, d = x.shape
    P = nl.tile_size.pmax
    dx = nl.ndarray((rows, d), dtype=x.dtype, buffer=nl.shared_hbm)
    dw = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.shared_hbm)
    w_sb = nl.load(weight.reshape((1, d)).broadcast(0, P))
    dw_acc = nl.zeros((1, d), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(math.ceil(rows / P)):
        n = min(P, rows - i * P)
        g = nl.load(grad[i * P:i * P + n, :])
        xs = nl.load(x[i * P:i * P + n, :])
        r = nl.load(rstd[i * P:i * P + n, :])
        xhat = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=xhat, data=xs, op0=nl.multiply, operand0=r)
        xhat_rounded = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=xhat_rounded, src=xhat)
        gw = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=gw, data1=g, data2=w_sb[0:n, :], op=nl.multiply)
        prod = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod, data1=gw, data2=xhat, op=nl.multiply)
        dot = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=dot, op=nl.add, data=prod, axis=(1,))
        neg_mean = nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg_mean, data=dot, op0=nl.multiply, operand0=-1.0 / d)
        inner = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=inner, data=xhat, op0=nl.multiply, operand0=neg_mean,
                                  op1=nl.add, operand1=gw)
        dx_tile = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=dx_tile, data=inner, op0=nl.multiply, operand0=r)
        nl.store(dx[i * P:i * P + n, :], dx_tile)
        gx = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=gx, data1=g, data2=xhat_rounded, op=nl.multiply)
        partial = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=partial, op=nl.add, data=gx)
        nisa.tensor_tensor(dst=dw_acc, data1=dw_acc, data2=partial, op=nl.add)
    nl.store(dw, dw_acc)
    return dx, dw


# ---- fast path: composite PyTorch ops ------------------------------------------------------------

def _forward_composite(x2d, weight, eps):
    xf = x2d.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * (xf * rstd).to(x2d.dtype), rstd


def _backward_composite(grad, x2d, weight, rstd):
    xhat = x2d.float() * rstd
    gw = grad.float() * weight.float()
    dx = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
    dw = (grad.float() * xhat.to(x2d.dtype).float()).sum(0, keepdim=True)
    return dx.to(x2d.dtype), dw


# ---- the ops ---------------------------------------------------------------------------------------

@nki_op("neuron_kernels::rms_norm", autocast_dtype=None)
def rms_norm_op(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor,
                                                                           torch.Tensor]:
    x2d = x.reshape(-1, x.shape[-1])
    if simulating() and x2d.shape[0] > 0:
        out, rstd = rms_norm_kernel(x2d.contiguous(), weight.contiguous(), eps)
    else:
        out, rstd = _forward_composite(x2d, weight, eps)
    return out.reshape(x.shape), rstd.reshape(*x.shape[:-1], 1)


@nki_op("neuron_kernels::rms_norm_backward", autocast_dtype=None)
def rms_norm_backward_op(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                         rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = x.shape[-1]
    g2d, x2d, r2d = grad.reshape(-1, d), x.reshape(-1, d), rstd.reshape(-1, 1)
    if simulating() and x2d.shape[0] > 0:
        dx, dw = rms_norm_backward_kernel(g2d.contiguous(), x2d.contiguous(),
                                          weight.contiguous(), r2d.contiguous())
    else:
        dx, dw = _backward_composite(g2d, x2d, weight, r2d)
    return dx.reshape(x.shape), dw.reshape(d).to(weight.dtype)


def _setup_context(ctx, inputs, output):
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])


def _backward(ctx, grad, _grad_rstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dw = rms_norm_backward_op(grad, x, weight, rstd)
    return dx, dw, None


rms_norm_op.register_autograd(_backward, setup_context=_setup_context)


# ---- eager: the composite, or the hand-written backward where it pays -----------------------------

# Elements of x from which the backward that reuses the forward's rstd (fewer passes than
# autograd's backward of the composite) outruns it despite a Python autograd.Function's fixed
# cost (tens of microseconds a call); below, the composite itself is faster. Measured with
# benchmarks/kernels.py's small cases at one thread.
FUNCTION_MIN_ELEMENTS = 1 << 17


class _RmsNormFunction(torch.autograd.Function):
    """The op's fast forward and backward without the custom operator's dispatch."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        out, rstd = _forward_composite(x.reshape(-1, x.shape[-1]), weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return out.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        d = x.shape[-1]
        dx, dw = _backward_composite(grad.reshape(-1, d), x.reshape(-1, d), weight, rstd)
        return dx.reshape(x.shape), dw.reshape(d).to(weight.dtype), None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dimension of `x` (any leading shape) with a `weight` of that size."""
    checks.inputs("rms_norm", x=x, weight=weight)
    checks.shape("rms_norm", x.dim() >= 1 and weight.dim() == 1
                 and weight.shape[0] == x.shape[-1],
                 lambda: f"weight has shape {tuple(weight.shape)}; expected "
                         f"({x.shape[-1] if x.dim() else '?'},) for x of shape {tuple(x.shape)} "
                         "(the size of x's last dimension)")
    if eager_fast():
        if x.numel() < FUNCTION_MIN_ELEMENTS:
            return rms_norm_reference(x, weight, eps)
        return _RmsNormFunction.apply(x, weight, float(eps))
    return rms_norm_op(x, weight, float(eps))[0]
