"""Neuron tensors between processes (torch.multiprocessing queues, pipes, DataLoader workers,
Hogwild training), as CUDA's IPC shares them.

Sending a neuron storage moves its bytes, once and in place, into device memory another process
can map (csrc/device/SharedStorage.h); the receiver maps the same memory, so writes on either
side are seen by both. The memory is freed when the last process lets go of it, a process that
dies holding it included, and it counts in the memory statistics of the process that allocated
it only. Descriptors travel as torch's CPU file-descriptor strategy sends them
(multiprocessing's DupFd), so the sender must be alive when the receiver unpickles, as on the
CPU. Start methods: spawn and forkserver share; a child forked after the parent initialized
neuron is refused at its first device use (csrc/device/Lifecycle.cpp)."""

from __future__ import annotations

import os
import threading
import weakref
from multiprocessing.reduction import DupFd, ForkingPickler

import torch

from .._C import device as _device_c


def _over(storage: torch.UntypedStorage) -> torch.Tensor:
    """A uint8 tensor over the whole storage (the bindings take tensors)."""
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


def share(storage: torch.UntypedStorage) -> int:
    """Moves `storage` into shareable device memory (a no-op when it is there already); returns
    the descriptor of that memory, owned by the storage."""
    return _device_c.share_storage(_over(storage))


def is_shared(storage: torch.UntypedStorage) -> bool:
    return _device_c.is_shared_storage(_over(storage))


# The storages this process received, by the identity of their shared memory (the file's inode,
# which cannot be reused while a storage here keeps the file open): tensors sent over one storage
# arrive over one storage, as torch's CPU sharing keeps them, with one mapping.
_received: dict[tuple[int, int], weakref.ref] = {}
_received_lock = threading.Lock()


def rebuild_storage(dup_fd, nbytes: int, device: int) -> torch.UntypedStorage:
    fd = dup_fd.detach()
    info = os.fstat(fd)
    key = (info.st_dev, info.st_ino)
    with _received_lock:
        known = _received.get(key)
        storage = known() if known is not None else None
        if storage is not None:
            os.close(fd)  # this process maps the memory already
            return storage
        storage = _device_c.open_shared_storage(fd, nbytes, device).untyped_storage()
        _received[key] = weakref.ref(storage, lambda _, key=key: _received.pop(key, None))
        return storage


def ipc_collect() -> None:
    """Frees the memory of tensors this process shared with other processes and has let go of,
    once every receiver has let go too (torch.cuda.ipc_collect's name). Until then such memory
    stays in this process's memory statistics, as CUDA keeps it; sharing and releasing also
    collect, so calling this is only needed to see the figures settle at once."""
    _device_c.ipc_collect()


def reduce_neuron_storage(storage: torch.UntypedStorage):
    fd = share(storage)
    return (rebuild_storage, (DupFd(fd), storage.nbytes(), storage.device.index))


def install() -> None:
    """Puts neuron storages in front of torch.multiprocessing's storage reduction (the one every
    tensor reduction goes through); CPU and CUDA storages reduce as before."""
    # internal: see runtime/torch_internals.py "torch.multiprocessing.reductions.reduce_storage"
    from torch.multiprocessing import reductions

    torch_reduce_storage = reductions.reduce_storage

    def reduce_storage(storage):
        if storage.device.type == "neuron":
            return reduce_neuron_storage(storage)
        return torch_reduce_storage(storage)

    ForkingPickler.register(torch.UntypedStorage, reduce_storage)
