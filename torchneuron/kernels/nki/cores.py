"""The multi-core model: a kernel launched on several NeuronCores (`kernel[2](...)`, a Logical
NeuronCore of two physical cores) runs one program per core; the cores share HBM (nl.shared_hbm),
wait for each other at a core barrier and exchange tiles with sendrecv (nisa's and nki.lnc's
names of these instructions are built on `wait_at_barrier` and `exchange` here).

Each program runs in its own thread, but only one runs at a time and the order is fixed: program 0
until it returns or reaches a barrier, then the next, and so on. So results do not depend on the
host's scheduling, a kernel without barriers runs exactly as its programs would one after the
other, and a barrier lets the other core catch up before the first goes on. A barrier one core
never reaches is refused (rule `core-barrier`) instead of hanging.
"""

from __future__ import annotations

import warnings

from . import dtypes as dt
from .context import current
from .errors import NkiValidationError, describe
from .isa_common import require_arch
from .ops import as_op
from .rules import fail, require_buffers, require_partitions
from .tensor import NkiTensor
from .tensor_indirection import refuse_on_dma
from .turns import TurnTaking


class Cores(TurnTaking):
    thread_name = "nki-core"

    def __init__(self, count: int):
        super().__init__(count)
        self.arrived: dict[int, str] = {}  # core -> what it waits on (state "waiting")
        self.mailbox: dict[tuple, list] = {}  # (sender, receiver, pipe) -> sent tiles, in order

    def _finish(self, me: int) -> None:
        with self.cond:
            self.state[me] = "done"
            if self.arrived:
                waiter, what = next(iter(self.arrived.items()))
                self.error = NkiValidationError(
                    "core-barrier", f"nisa.core_barrier: core {waiter} waits at a barrier on "
                    f"{what}, but core {me} returned without reaching it; every core of the "
                    "barrier must call it the same number of times")
                self.cond.notify_all()
                return
            self._pass_turn(me)

    def barrier(self, me: int, what: str) -> None:
        with self.cond:
            self.arrived[me] = what
            if len(self.arrived) == self.count:  # the last core to arrive goes on at once
                for core in self.arrived:
                    self.state[core] = "ready"
                self.arrived.clear()
                return
            self.state[me] = "waiting"
            done = [c for c in range(self.count) if self.state[c] == "done"]
            if done:
                raise NkiValidationError(
                    "core-barrier", f"nisa.core_barrier: core {me} waits at a barrier on {what}, "
                    f"but core {done[0]} already returned without reaching it")
            self._pass_turn(me)
        self._wait_turn(me)


_REDUCE_OPS = ("add", "maximum", "minimum")  # the DMA reduction's operators


def wait_at_barrier(I: str, data, cores) -> None:
    """Waits until every core of `cores` (the two cores of the launch, (0, 1)) has reached this
    barrier; their writes to the shared HBM tensor `data` before it are seen after it."""
    run = current()
    require_arch(I, "gen3")
    if not isinstance(data, NkiTensor) or data.buffer.name != "shared_hbm":
        fail("core-barrier", f"{I}: data "
             f"{describe(data) if isinstance(data, NkiTensor) else repr(data)} must be a tensor "
             "in shared HBM (nl.shared_hbm), the memory the cores share")
    if tuple(int(c) for c in cores) != (0, 1):
        fail("core-barrier", f"{I}: cores={tuple(cores)!r}; the barrier synchronizes the two "
             "cores of a Logical NeuronCore, cores=(0, 1)")
    if run.grid != (2,) or run.cores is None:
        fail("core-barrier", f"{I} on {describe(data)}: the kernel was launched on "
             f"{run.grid or 'one core'}; a barrier needs a launch on two cores (kernel[2](...))")
    run.cores.barrier(run.program_ids[0], describe(data))


def exchange(I: str, src, dst, send_to_rank, recv_from_rank, pipe: int = 0):
    """Sends src to core send_to_rank and receives core recv_from_rank's src, both cores meeting
    here (a rendezvous: a core that never calls it is refused with the core-barrier rule).
    Returns the received bits, flat (None while tracing shapes); they fit dst."""
    run = current()
    require_arch(I, "gen3")
    refuse_on_dma(I, {"src": src, "dst": dst})
    for role, t in (("src", src), ("dst", dst)):
        require_buffers(I, role, t, ("sbuf", "hbm"))
        if t.on_chip:
            require_partitions(I, role, t, run.limits)
    if run.grid != (2,) or run.cores is None:
        fail("sendrecv", f"{I}: the kernel was launched on {run.grid or 'one core'}; sendrecv "
             "exchanges between the two cores of a launch kernel[2](...)")
    me = run.program_ids[0]
    peers = {"send_to_rank": int(send_to_rank), "recv_from_rank": int(recv_from_rank)}
    for role, rank in peers.items():
        if rank != 1 - me:
            fail("sendrecv", f"{I}: {role}={rank} on core {me}; the other core of the launch is "
                 f"{1 - me}")
    bits = src.raw().reshape(-1).clone() if run.computes else None
    cores = run.cores
    with cores.cond:
        cores.mailbox.setdefault((me, 1 - me, pipe), []).append((bits, src.dtype, describe(src),
                                                                 src.size))
    cores.barrier(me, f"{I} (pipe {pipe})")
    with cores.cond:
        sent, dtype, what, size = cores.mailbox[(1 - me, me, pipe)].pop(0)
    if size != dst.size or dtype is not dst.dtype:
        fail("sendrecv", f"{I}: core {1 - me} sent {what}, which does not fit dst {describe(dst)} "
             f"of core {me}: the same element count and dtype are needed")
    return sent


def reduce_with_peer(I: str, src, dst, send_to_rank, recv_from_rank, reduce_op) -> None:
    """sendrecv_compute (nki.lnc's and nisa's): dst = reduce_op(src, the peer's src), computed
    in float32 and cast to dst (the DMA engines compute in float32, as nisa.dma_compute
    documents); src and dst both in SBUF or both in private HBM."""
    op = as_op(reduce_op, I, "reduce_op")
    if op.name not in _REDUCE_OPS:
        fail("operator", f"{I}: reduce_op={op!r}; the DMA reduction supports nl.add, "
             "nl.maximum and nl.minimum")
    if {t.buffer.name for t in (src, dst)} not in ({"sbuf"}, {"private_hbm"}):
        fail("sendrecv", f"{I}: src {describe(src)} and dst {describe(dst)} must both be in SBUF "
             "or both in private HBM (mixing them, or shared HBM, is not supported)")
    if src.size != dst.size or src.dtype is not dst.dtype:
        fail("sendrecv", f"{I}: src {describe(src)} and dst {describe(dst)} must have the same "
             "element count and dtype: dst holds reduce_op(src, peer) element by element")
    sent = exchange(I, src, dst, send_to_rank, recv_from_rank)
    if sent is None:
        return
    mine = src.read_f32().reshape(-1)
    theirs = dt.to_float32(sent, dst.dtype).reshape(-1)
    dst.write(op.binary(mine, theirs).reshape(dst.shape), current())


def _deprecated(name: str) -> None:
    # NKI 0.8 deprecates the nisa names of the LNC functions for nki.lnc's (and ignores
    # sendrecv's pipe_id), warning as AWS's NKI does.
    warnings.warn(f"nisa.{name} is deprecated in NKI 0.8; use nki.lnc.{name}"
                  + (" without pipe_id, which NKI 0.8 ignores" if name == "sendrecv" else ""),
                  DeprecationWarning, stacklevel=4)


def core_barrier(data, cores, engine=None, name=None):
    """nisa.core_barrier (deprecated for nki.lnc.core_barrier): the barrier above."""
    _deprecated("core_barrier")
    wait_at_barrier("nisa.core_barrier", data, cores)


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id=0, dma_engine=None, priority=None,
             name=None):
    """nisa.sendrecv (deprecated for nki.lnc.sendrecv): dst receives the other core's src;
    pipe_id is ignored, as NKI 0.8 ignores it (the Nth exchange of one core meets the Nth of the
    other)."""
    _deprecated("sendrecv")
    sent = exchange("nisa.sendrecv", src, dst, send_to_rank, recv_from_rank)
    if sent is not None:
        dst.write_raw(sent, current())


def sendrecv_compute(src, dst, send_to_rank, recv_from_rank, reduce_op, name=None):
    """nisa.sendrecv_compute (deprecated for nki.lnc.sendrecv_compute): dst = reduce_op(src,
    the other core's src)."""
    _deprecated("sendrecv_compute")
    reduce_with_peer("nisa.sendrecv_compute", src, dst, send_to_rank, recv_from_rank, reduce_op)
