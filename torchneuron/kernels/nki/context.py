"""The state of one kernel run: the NeuronCore's limits, where HBM lives, how much SBUF and PSUM
the live tensors hold, the SPMD program ids and the engines' registers.

A tensor's allocation is held while a Python reference to it (or to a view of it) is alive, as
the compiler keeps a tile while later instructions use it: the SBUF/PSUM capacity rules count the
live allocations.
"""

from __future__ import annotations

import math
import threading
import weakref

import torch

from . import buffers as buf
from . import dtypes as dt
from . import tensor as _tensor_methods
from .errors import NkiError, NkiValidationError, describe_parts
from .placement import OnChipMemory
from .rules import Limits

_local = threading.local()


class KernelRun:
    def __init__(self, limits: Limits, device: torch.device | None, computes: bool, grid=(),
                 shared: "KernelRun | None" = None):
        """One core's run; `shared` is the launch's first core, whose HBM state (the staged
        arguments, shared_hbm outputs, allocated HBM) every core of the launch shares."""
        self.limits = limits
        self.device = device  # where kernel-allocated HBM lives (None: shapes only)
        self.computes = computes  # False while tracing shapes for torch.compile's fake pass
        self.grid = tuple(grid)
        self.program_ids: tuple[int, ...] = ()
        self.sbuf_bytes = 0  # held per partition by live SBUF allocations
        self.psum_banks = 0
        self.staged: list[buf.Storage] = []
        self.shared_hbm: dict[int, buf.Storage] = {}  # SPMD programs share shared_hbm outputs
        self.hbm_counter = 0
        self.hbm_tensors: dict[int, torch.Tensor] = {}  # id(storage) -> the device tensor
        self.scalar_reduce_regs = None  # nisa.activation's 128 accumulation registers
        self.vector_accumulators = None
        self.generator = torch.Generator().manual_seed(0)
        self.cores = None  # the launch's Cores when it runs on several (nisa.core_barrier)
        self.release_refs: set = set()  # the weak references that free allocations
        self.instructions = [0]  # nki.isa instructions run, all cores of the launch together
        if shared is not None:
            self.instructions = shared.instructions
            self.staged, self.shared_hbm = shared.staged, shared.shared_hbm
            self.hbm_tensors, self.generator = shared.hbm_tensors, shared.generator
        self.memories = {
            "sbuf": OnChipMemory("sbuf", limits.pmax, limits.sbuf_bytes_per_partition, 1),
            "psum": OnChipMemory("psum", limits.pmax, limits.psum_bytes_per_partition,
                                 limits.psum_bank_bytes)}

    # ---- allocation --------------------------------------------------------------------------

    def allocate(self, shape, dtype: dt.NkiDtype, buffer: buf.Buffer, name: str,
                 address=None) -> buf.Storage:
        shape = tuple(int(s) for s in shape)
        if any(s <= 0 for s in shape):
            raise NkiValidationError("shape", f"nl.ndarray {name!r}: shape {shape} must have "
                                     "positive sizes")
        what = _Description(name, buffer.name, shape, dtype)  # formatted only for a message
        if buffer.kind == "hbm":
            if address is not None:
                raise NkiValidationError("address-range", f"nl.ndarray {what}: address= places "
                                         "on-chip tensors (SBUF, PSUM); HBM tensors have none")
            return self._allocate_hbm(shape, dtype, buffer, name)
        per_partition = math.prod(shape[1:]) * dtype.itemsize if len(shape) > 1 else dtype.itemsize
        if shape[0] > self.limits.pmax:
            raise NkiValidationError("partition-dim", f"nl.ndarray {what}: the "
                                     f"partition dimension (dim 0) is {shape[0]}; a NeuronCore has "
                                     f"{self.limits.pmax} partitions (nl.tile_size.pmax)")
        memory = self.memories[buffer.kind]
        if address is not None:
            return self._place(shape, dtype, buffer, name, what, per_partition, memory, address)
        if buffer.kind == "sbuf":
            cap = self.limits.sbuf_bytes_per_partition
            placed = memory.place_auto(per_partition, what)
            if placed is None:
                raise NkiValidationError("sbuf-capacity", f"nl.ndarray {what} needs "
                                         f"{per_partition} bytes per partition, but live tensors "
                                         f"hold {self.sbuf_bytes} of the {cap} bytes of an SBUF "
                                         f"partition on {self.limits.profile}")
            self.sbuf_bytes += per_partition
            cost = ("sbuf_bytes", per_partition)
        else:
            bank = self.limits.psum_bank_bytes
            banks = -(-per_partition // bank)
            if per_partition > self.limits.psum_bytes_per_partition:
                raise NkiValidationError("psum-tile", f"nl.ndarray {what} needs "
                                         f"{per_partition} bytes per partition; a PSUM partition "
                                         f"holds {self.limits.psum_bytes_per_partition} "
                                         f"({self.limits.psum_banks} banks of {bank})")
            placed = memory.place_auto(per_partition, what)
            if placed is None:
                raise NkiValidationError("psum-capacity", f"nl.ndarray {what} needs "
                                         f"{banks} PSUM bank(s) of {bank} bytes per partition, "
                                         f"but live tensors hold {self.psum_banks} of the "
                                         f"{self.limits.psum_banks} banks on {self.limits.profile}")
            self.psum_banks += banks
            cost = ("psum_banks", banks)
        numel = math.prod(shape)
        device = "cpu" if self.computes else "meta"
        data = torch.empty(numel, dtype=dtype.storage, device=device)
        storage = buf.Storage(buffer, data, dtype, shape, name)
        if self.computes:
            fill_uninitialized(data, dtype)
        self._on_release(storage, *cost, memory, placed[0])
        return storage

    def _place(self, shape, dtype, buffer, name, what, per_partition, memory,
               address) -> buf.Storage:
        """An explicitly placed tensor: a window of its memory's image at `address`."""
        try:
            p0, start = (int(a) for a in address)
        except (TypeError, ValueError):
            raise NkiValidationError("address-range", f"nl.ndarray {what}: address={address!r} "
                                     "must be (partition_offset, free_offset_in_bytes)") from None
        if start % dtype.itemsize:
            raise NkiValidationError("address-align", f"nl.ndarray {what}: free offset {start} "
                                     f"bytes is not a multiple of {dtype}'s {dtype.itemsize} bytes")
        token = memory.place_explicit(p0, shape[0], start, per_partition, what)
        image = memory.bytes_image(self.computes)
        data = image.view(dtype.storage)
        pitch = memory.capacity // dtype.itemsize
        written = memory.written_mask(dtype.storage, data.numel()) \
            if buffer.kind == "psum" and self.computes else None
        storage = buf.Storage(buffer, data, dtype, shape, name, pitch=pitch,
                              base=p0 * pitch + start // dtype.itemsize, written=written)
        self._on_release(storage, None, 0, memory, token)
        return storage

    def _allocate_hbm(self, shape, dtype, buffer, name) -> buf.Storage:
        if buffer is buf.shared_hbm and len(self.grid) > 0:
            # Every SPMD program allocates "the" shared output; they all get one tensor.
            key = self.hbm_counter
            self.hbm_counter += 1
            if key in self.shared_hbm:
                return self.shared_hbm[key]
        numel = math.prod(shape)
        if self.computes:
            device = self.device or torch.device("cpu")
            tensor = torch.empty(numel, dtype=dt.torch_dtype_of(dtype), device=device)
            data = cpu_view(tensor, dtype)
            fill_uninitialized(data, dtype)
        else:
            tensor = None
            data = torch.empty(numel, dtype=dtype.storage, device="meta")
        storage = buf.Storage(buffer, data, dtype, shape, name)
        self.hbm_tensors[id(storage)] = tensor
        if buffer is buf.shared_hbm and len(self.grid) > 0:
            self.shared_hbm[key] = storage
        return storage

    def _on_release(self, storage, attr, amount, memory, token) -> None:
        """Frees the allocation's capacity when the last reference to it goes (a weak reference
        with a callback: weakref.finalize costs several times more, at every allocation)."""
        run_ref = weakref.ref(self)

        def released(ref):
            self_ = run_ref()
            if self_ is not None:
                self_.release_refs.discard(ref)
            _release(run_ref, attr, amount, memory, token)

        self.release_refs.add(weakref.ref(storage, released))

    # ---- registers ----------------------------------------------------------------------------

    def scalar_regs(self) -> torch.Tensor:
        if self.scalar_reduce_regs is None:
            self.scalar_reduce_regs = torch.zeros(self.limits.pmax, dtype=torch.float32)
        return self.scalar_reduce_regs

    def vector_regs(self) -> torch.Tensor:
        if self.vector_accumulators is None:
            self.vector_accumulators = torch.zeros(self.limits.pmax, dtype=torch.float32)
        return self.vector_accumulators


class _Description:
    """'name' (sbuf, shape (128, 512), float32), formatted when a message needs it: allocation
    is the simulator's most frequent step and most messages are never shown."""

    __slots__ = ("parts",)

    def __init__(self, *parts):
        self.parts = parts

    def __str__(self) -> str:
        return describe_parts(*self.parts)

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def _release(run_ref, attr: str | None, amount: int, memory: OnChipMemory, token: int) -> None:
    run = run_ref()
    if run is not None and attr is not None:
        setattr(run, attr, getattr(run, attr) - amount)
    memory.release(token)


def fill_uninitialized(data: torch.Tensor, dtype: dt.NkiDtype) -> None:
    """New memory reads as NaN (floats) or 4 (integers), as AWS's simulator documents, so a
    kernel that computes on memory it never wrote shows NaN instead of a plausible number."""
    if dtype.storage in _NAN_FILLABLE:  # a float type torch holds natively: fill in place
        data.fill_(float("nan"))
    elif dtype.is_float:
        data.copy_(dt.from_float32(torch.full((data.numel(),), float("nan")), dtype))
    else:
        data.fill_(4)


_NAN_FILLABLE = (torch.float32, torch.bfloat16, torch.float16)


def cpu_view(tensor: torch.Tensor, dtype: dt.NkiDtype) -> torch.Tensor:
    """A flat CPU tensor over all of `tensor`'s storage, typed as `dtype.storage`: for neuron
    tensors, the C++ core's CPU alias (through its one host-access check)."""
    if tensor.device.type != "cpu":
        from ..._C import aten as _aten_c
        tensor = _aten_c.cpu_alias(tensor)
    raw = torch.empty(0, dtype=dtype.storage)
    nbytes = tensor.untyped_storage().nbytes()
    return raw.set_(tensor.untyped_storage(), 0, (nbytes // dtype.itemsize,), (1,))


def current() -> KernelRun:
    run = getattr(_local, "run", None)
    if run is None:
        raise NkiError("this NKI API runs only inside a kernel: decorate the function with "
                       "@nki.jit and call it with tensors")
    return run


def active() -> KernelRun | None:
    return getattr(_local, "run", None)


class running:
    """Makes `run` the current kernel run of this thread for a `with` block."""

    def __init__(self, run: KernelRun):
        self.run = run

    def __enter__(self):
        self.previous = getattr(_local, "run", None)
        if self.previous is not None:
            raise NkiError("an @nki.jit kernel was called from inside another kernel; call the "
                           "inner function without @nki.jit (NKI inlines plain function calls)")
        _local.run = self.run
        return self.run

    def __exit__(self, *exc):
        _local.run = self.previous
        return False


_tensor_methods.provide(active=active)
