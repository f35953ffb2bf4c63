"""The online softmax step the attention and cross-entropy kernels share: a row block of scores
x (rows, cols) meets the running max m and running sum l of the blocks before it.

    m' = max(m, rowmax(x)),  p = exp(x - m'),  alpha = exp(m - m'),  l' = l * alpha + rowsum(p)

A plain function that kernels inline; l is updated in place, the caller rescales whatever else it
accumulated by alpha and carries m' on. rowsum(p) comes free from the Scalar Engine's
accumulation registers while it computes exp.
"""

from __future__ import annotations

from ..nki import isa as nisa
from ..nki import language as nl

NEG_LARGE = -3.0e38  # a finite -inf for the starting max: exp() of it minus anything is 0


def online_softmax_step(x, m, l):
    """-> (m', p, alpha) for a scores block x; l becomes l'."""
    rows, cols = x.shape[0], x.shape[1]
    tile_max = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=tile_max, op=nl.maximum, data=x, axis=(1,))
    m_new = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=m_new, data1=m, data2=tile_max, op=nl.maximum)
    neg_m_new = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=neg_m_new, data=m_new, op0=nl.multiply, operand0=-1.0)
    p = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    row_sum = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=p, op=nl.exp, data=x, bias=neg_m_new, reduce_op=nl.add,
                    reduce_res=row_sum, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    alpha = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=alpha, op=nl.exp, data=m, bias=neg_m_new)
    nisa.scalar_tensor_tensor(dst=l, data=l, op0=nl.multiply, operand0=alpha, op1=nl.add,
                              operand1=row_sum)
    return m_new, p, alpha


def log_sum_exp(m, l):
    """m + log(l): the rows' log-sum-exp once every block was seen."""
    rows = m.shape[0]
    log_l = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=log_l, op=nl.log, data=l)
    lse = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=lse, data1=log_l, data2=m, op=nl.add)
    return lse
