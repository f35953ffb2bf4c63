"""Moving a tile between HBM and SBUF inside a test kernel: the two DMA copies nearly every
instruction test starts and ends with."""

import nki.isa as nisa
import nki.language as nl


def tile_in(x, dtype=None):
    """An SBUF copy of `x` (an HBM tensor), in `dtype` if given."""
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def tile_out(t, dtype=None):
    """A shared-HBM copy of `t`, in `dtype` if given: what a kernel returns."""
    out = nl.ndarray(t.shape, dtype or t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
