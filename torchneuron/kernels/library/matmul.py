"""The matrix products the library's kernels share: C = sum_i A_i @ B_i on the Tensor Engine,
for any sizes (edge tiles are partial), with each operand read from HBM in whichever layout it
is stored, so that a backward pass needs no transposed copies in HBM.

Tiles: 128 output rows (the stationary free size) by 512 output columns (one PSUM bank of
float32) by 128 contraction rows (the partitions), accumulated in PSUM over the contraction.
A row-major (M, K) left operand reaches the stationary (K, M) layout through a transposing DMA;
a (K, M) one (`a_transposed`) loads as it is. Likewise for the (K, N) moving operand.
"""

from __future__ import annotations

import math

from ..nki import isa as nisa
from ..nki import jit
from ..nki import language as nl

TILE_M, TILE_K, TILE_N = 128, 128, 512


def _dims(a, b, a_transposed, b_transposed):
    M, K = (a.shape[1], a.shape[0]) if a_transposed else (a.shape[0], a.shape[1])
    K2, N = (b.shape[1], b.shape[0]) if b_transposed else (b.shape[0], b.shape[1])
    assert K == K2, f"matmul: contraction sizes {K} and {K2} differ"
    return M, K, N


def _stationary(a, a_transposed, m0, mt, k0, kt):
    if a_transposed:
        return nl.load(a[k0:k0 + kt, m0:m0 + mt])
    return nl.load_transpose2d(a[m0:m0 + mt, k0:k0 + kt])


def _moving(b, b_transposed, k0, kt, n0, nt):
    if b_transposed:
        return nl.load_transpose2d(b[n0:n0 + nt, k0:k0 + kt])
    return nl.load(b[k0:k0 + kt, n0:n0 + nt])


def matmul_into(out, pairs, a_transposed=False, b_transposed=False, scale=None):
    """out (M, N) in HBM = scale * sum over (a, b) in pairs of a @ b; a plain function that
    kernels inline."""
    M, K, N = _dims(*pairs[0], a_transposed, b_transposed)
    for m in nl.affine_range(math.ceil(M / TILE_M)):
        mt = min(TILE_M, M - m * TILE_M)
        for n in nl.affine_range(math.ceil(N / TILE_N)):
            nt = min(TILE_N, N - n * TILE_N)
            acc = nl.ndarray((mt, nt), dtype=nl.float32, buffer=nl.psum)
            for a, b in pairs:
                K = _dims(a, b, a_transposed, b_transposed)[1]
                for k in nl.affine_range(math.ceil(K / TILE_K)):
                    kt = min(TILE_K, K - k * TILE_K)
                    nisa.nc_matmul(dst=acc,
                                   stationary=_stationary(a, a_transposed, m * TILE_M, mt,
                                                          k * TILE_K, kt),
                                   moving=_moving(b, b_transposed, k * TILE_K, kt,
                                                  n * TILE_N, nt))
            res = nl.ndarray((mt, nt), dtype=out.dtype, buffer=nl.sbuf)
            if scale is None:
                nisa.tensor_copy(dst=res, src=acc)
            else:
                nisa.tensor_scalar(dst=res, data=acc, op0=nl.multiply, operand0=scale)
            nl.store(out[m * TILE_M:m * TILE_M + mt, n * TILE_N:n * TILE_N + nt], res)


@jit
def matmul_kernel(a, b, a_transposed=False, b_transposed=False, out_dtype=None):
    """a @ b (a stored as A or A^T, b as B or B^T) -> (M, N) in `out_dtype` (a's by default)."""
    M, _, N = _dims(a, b, a_transposed, b_transposed)
    out = nl.ndarray((M, N), dtype=out_dtype or a.dtype, buffer=nl.shared_hbm)
    matmul_into(out, [(a, b)], a_transposed, b_transposed)
    return out


@jit
def matmul_sum_kernel(a1, b1, a2, b2, a_transposed=False, b_transposed=False, out_dtype=None):
    """a1 @ b1 + a2 @ b2, accumulated in one PSUM tile (a backward through two projections of
    one input)."""
    M, _, N = _dims(a1, b1, a_transposed, b_transposed)
    out = nl.ndarray((M, N), dtype=out_dtype or a1.dtype, buffer=nl.shared_hbm)
    matmul_into(out, [(a1, b1), (a2, b2)], a_transposed, b_transposed)
    return out
