"""The SwiGLU MLP of Llama-family models:
    out = (silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T
with nn.Linear's weight layouts: w_gate and w_up (intermediate, hidden), w_down (hidden,
intermediate), no biases.

The forward op returns the two projections (gate, up) beside the output, for the backward:
    h = silu(gate) * up,  dh = g @ w_down,  dup = dh * silu(gate),
    dgate = dh * up * silu'(gate),  dx = dgate @ w_gate + dup @ w_up,
    dw_down = g.T @ h,  dw_gate = dgate.T @ x,  dw_up = dup.T @ x.
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
from .matmul import matmul_into, matmul_kernel, matmul_sum_kernel
from .mode import eager_fast, simulating


def swiglu_mlp_reference(x, w_gate, w_up, w_down):
    """Plain PyTorch, as transformers' LlamaMLP computes it."""
    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)


# ---- NKI kernels ------------------------------------------------------------------------------------

@jit
def swiglu_forward_kernel(x, w_gate, w_up, w_down):
    """x (rows, hidden) -> out (rows, hidden), gate and up (rows, intermediate): both
    projections on the Tensor Engine, silu(gate) * up on the Scalar and Vector Engines, then
    the down projection."""
    rows, _ = x.shape
    inter = w_gate.shape[0]
    gate = nl.ndarray((rows, inter), dtype=x.dtype, buffer=nl.shared_hbm)
    up = nl.ndarray((rows, inter), dtype=x.dtype, buffer=nl.shared_hbm)
    h = nl.ndarray((rows, inter), dtype=x.dtype, buffer=nl.hbm)
    out = nl.ndarray((rows, w_down.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    matmul_into(gate, [(x, w_gate)], b_transposed=True)
    matmul_into(up, [(x, w_up)], b_transposed=True)
    P = nl.tile_size.pmax
    for i in nl.affine_range(math.ceil(rows / P)):
        n = min(P, rows - i * P)
        g = nl.load(gate[i * P:i * P + n, :])
        u = nl.load(up[i * P:i * P + n, :])
        act = nl.ndarray((n, inter), dtype=x.dtype, buffer=nl.sbuf)  # rounded, as F.silu
        nisa.activation(dst=act, op=nl.silu, data=g)
        prod = nl.ndarray((n, inter), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod, data1=act, data2=u, op=nl.multiply)
        nl.store(h[i * P:i * P + n, :], prod)
    matmul_into(out, [(h, w_down)], b_transposed=True)
    return out, gate, up


@jit
def swiglu_activation_backward_kernel(dh, gate, up):
    """-> h = silu(gate)*up, dgate = dh*up*silu'(gate), dup = dh*silu(gate), 128 rows a tile."""
    rows, inter = gate.shape
    h = nl.ndarray(gate.shape, dtype=gate.dtype, buffer=nl.shared_hbm)
    dgate = nl.ndarray(gate.shape, dtype=gate.dtype, buffer=nl.shared_hbm)
    dup = nl.ndarray(gate.shape, dtype=gate.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    for i in nl.affine_range(math.ceil(rows / P)):
        n = min(P, rows - i * P)
        rows_i = slice(i * P, i * P + n)
        g, u, d = nl.load(gate[rows_i, :]), nl.load(up[rows_i, :]), nl.load(dh[rows_i, :])
        act = nl.ndarray((n, inter), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=act, op=nl.silu, data=g)
        slope = nl.ndarray((n, inter), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=slope, op=nl.silu_dx, data=g)
        h_tile = nl.ndarray((n, inter), dtype=gate.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=h_tile, data1=act, data2=u, op=nl.multiply)
        dup_tile = nl.ndarray((n, inter), dtype=gate.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=dup_tile, data1=d, data2=act, op=nl.multiply)
        du = nl.ndarray((n, inter), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=du, data1=d, data2=u, op=nl.multiply)
        dgate_tile = nl.ndarray((n, inter), dtype=gate.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=dgate_tile, data1=du, data2=slope, op=nl.multiply)
        nl.store(h[rows_i, :], h_tile)
        nl.store(dgate[rows_i, :], dgate_tile)
        nl.store(dup[rows_i, :], dup_tile)
    return h, dgate, dup


def _simulated_backward(g, x, w_gate, w_up, w_down, gate, up):
    dh = matmul_kernel(g, w_down)
    h, dgate, dup = swiglu_activation_backward_kernel(dh, gate, up)
    dx = matmul_sum_kernel(dgate, w_gate, dup, w_up)
    dw_down = matmul_kernel(g, h, a_transposed=True)
    dw_gate = matmul_kernel(dgate, x, a_transposed=True)
    dw_up = matmul_kernel(dup, x, a_transposed=True)
    return dx, dw_gate, dw_up, dw_down


# ---- fast path: composite PyTorch ops -------------------------------------------------------------

def _forward_composite(x, w_gate, w_up, w_down):
    gate, up = F.linear(x, w_gate), F.linear(x, w_up)
    return F.linear(F.silu(gate) * up, w_down), gate, up


def _backward_composite(g, x, w_gate, w_up, w_down, gate, up):
    """Ordered so that each (rows, intermediate) temporary goes as soon as it is used: the peak
    holds about as many of them as autograd's backward of the composite does."""
    act = F.silu(gate)
    dw_down = g.t() @ (act * up)
    dh = g @ w_down
    dup = dh * act
    del act
    gate_f = gate.float()
    sig = torch.sigmoid(gate_f)
    slope = (1 - sig).mul_(gate_f).add_(1).mul_(sig)  # silu'(gate), in float32
    del sig, gate_f
    dgate = slope.mul_(dh).mul_(up).to(x.dtype)
    del slope, dh
    dx = torch.addmm(dgate @ w_gate, dup, w_up)
    return dx, dgate.t() @ x, dup.t() @ x, dw_down


# ---- the ops -----------------------------------------------------------------------------------------

@nki_op("neuron_kernels::swiglu_mlp", autocast_dtype=None)
def swiglu_mlp_op(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
                  w_down: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x2d = x.reshape(-1, x.shape[-1])
    if simulating() and x2d.shape[0] > 0:
        out, gate, up = swiglu_forward_kernel(x2d.contiguous(), w_gate.contiguous(),
                                              w_up.contiguous(), w_down.contiguous())
    else:
        out, gate, up = _forward_composite(x2d, w_gate, w_up, w_down)
    return out.reshape(*x.shape[:-1], w_down.shape[0]), gate, up


@nki_op("neuron_kernels::swiglu_mlp_backward", autocast_dtype=None)
def swiglu_mlp_backward_op(grad: torch.Tensor, x: torch.Tensor, w_gate: torch.Tensor,
                           w_up: torch.Tensor, w_down: torch.Tensor, gate: torch.Tensor,
                           up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                      torch.Tensor]:
    g2d, x2d = grad.reshape(-1, grad.shape[-1]), x.reshape(-1, x.shape[-1])
    if simulating() and x2d.shape[0] > 0:
        args = [t.contiguous() for t in (g2d, x2d, w_gate, w_up, w_down, gate, up)]
        dx, dw_gate, dw_up, dw_down = _simulated_backward(*args)
    else:
        dx, dw_gate, dw_up, dw_down = _backward_composite(g2d, x2d, w_gate, w_up, w_down, gate,
                                                          up)
    return dx.reshape(x.shape), dw_gate, dw_up, dw_down


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs, output[1], output[2])


def _backward(ctx, grad, _grad_gate, _grad_up):
    return swiglu_mlp_backward_op(grad, *ctx.saved_tensors)


swiglu_mlp_op.register_autograd(_backward, setup_context=_setup_context)


def swiglu_mlp(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
               w_down: torch.Tensor) -> torch.Tensor:
    """silu(x @ w_gate.T) * (x @ w_up.T) @ w_down.T for x (..., hidden)."""
    tensors = dict(x=x, w_gate=w_gate, w_up=w_up, w_down=w_down)
    checks.inputs("swiglu_mlp", **tensors)
    checks.shape("swiglu_mlp", len({t.dtype for t in tensors.values()}) == 1,
                 lambda: "x and the weights must share one dtype (the Tensor Engine multiplies "
                         "equal dtypes); got "
                         f"{', '.join(f'{k}={t.dtype}' for k, t in tensors.items())}")
    hidden = x.shape[-1] if x.dim() else None
    inter = w_gate.shape[0] if w_gate.dim() == 2 else None
    checks.shape("swiglu_mlp", x.dim() >= 1 and w_gate.dim() == 2
                 and tuple(w_gate.shape) == (inter, hidden)
                 and tuple(w_up.shape) == (inter, hidden)
                 and tuple(w_down.shape) == (hidden, inter),
                 lambda: f"expected w_gate and w_up (intermediate, {hidden}) and w_down "
                         f"({hidden}, intermediate) for x {tuple(x.shape)}; got w_gate "
                         f"{tuple(w_gate.shape)}, w_up {tuple(w_up.shape)}, w_down "
                         f"{tuple(w_down.shape)}")
    if eager_fast():
        # The composite itself: the op runs the same three products and keeps what autograd
        # keeps, so in eager it has nothing to win and its dispatch to lose (0.55x at a tiny
        # Llama's sizes, parity at 2048 x 1024 x 2816, measured).
        return swiglu_mlp_reference(x, w_gate, w_up, w_down)
    return swiglu_mlp_op(x, w_gate, w_up, w_down)[0]
