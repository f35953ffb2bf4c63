"""`nki.lnc`: data exchange, reduction and synchronization between the two physical NeuronCores
of a Logical NeuronCore, the newest reference's home of the instructions nki.isa held before
(nki.lnc.core_barrier, sendrecv without pipe_id, sendrecv_compute). They run on the multi-core
model of cores.py: a launch kernel[2](...), one program per core.

As documented: sendrecv and sendrecv_compute need LNC degree 2 (the other core of the launch as
peer, rule `sendrecv`); `priority` (0 highest to 3 lowest) is a DMA quality of service of
NeuronCore-v4, refused with dma_engine=gpsimd_dma; sendrecv_compute writes reduce_op(src, peer)
to dst for reduce_op nl.add, nl.maximum or nl.minimum, src and dst both in SBUF or both in
private HBM (cores.py's reduce_with_peer). core_barrier is documented at LNC degree 1 too, where
the other core runs another kernel: the software NeuronCore runs one kernel at a time, so there
it needs a launch on two cores (rule `core-barrier`).
"""

from __future__ import annotations

from .context import current
from .cores import exchange, reduce_with_peer, wait_at_barrier
from .isa import counted
from .isa_common import require_arch
from .isa_enums import dma_engine as DmaEngine
from .isa_enums import engine as Engine
from .rules import fail


def _check_priority(I: str, priority, dma_engine=DmaEngine.dma) -> None:
    if priority is None:
        return
    if dma_engine is DmaEngine.gpsimd_dma:
        fail("dma-mode", f"{I}: priority={priority!r} with dma_engine=gpsimd_dma; that engine "
             "takes priority=None")
    require_arch(f"{I} with priority=", "gen4")
    if not isinstance(priority, int) or not 0 <= priority <= 3:
        fail("dma-mode", f"{I}: priority={priority!r} must be 0 (highest) to 3 (lowest)")


@counted
def core_barrier(data, cores, engine=Engine.gpsimd, name=None):
    """Waits until both cores reach this barrier; their writes to the shared HBM tensor `data`
    before it are seen after it."""
    wait_at_barrier("nki.lnc.core_barrier", data, cores)


@counted
def sendrecv(src, dst, send_to_rank, recv_from_rank, dma_engine=DmaEngine.dma, name=None,
             priority=None):
    """Sends src to core send_to_rank while dst receives core recv_from_rank's src; the Nth
    sendrecv of one core meets the Nth of the other."""
    I = "nki.lnc.sendrecv"
    _check_priority(I, priority, dma_engine)
    sent = exchange(I, src, dst, send_to_rank, recv_from_rank)
    if sent is not None:
        dst.write_raw(sent, current())


@counted
def sendrecv_compute(src, dst, send_to_rank, recv_from_rank, reduce_op, name=None,
                     priority=None):
    """dst = reduce_op(src, the src core recv_from_rank sends) while src goes to send_to_rank."""
    I = "nki.lnc.sendrecv_compute"
    _check_priority(I, priority)
    reduce_with_peer(I, src, dst, send_to_rank, recv_from_rank, reduce_op)
