"""Neuron tensors between processes (torch.multiprocessing queues, pipes, DataLoader workers).

Sending one needs device memory that another process can map (CUDA's IPC handles), which the
software NeuronCore does not offer yet. Until it does, a neuron tensor (or storage) sent through
torch.multiprocessing arrives as an error: the receiver's get()/recv() raises at once, naming
the cure. Raising on the sender's side would not do: a Queue pickles in a feeder thread, where
an error is printed and the item dropped, and the receiver waits forever."""

from __future__ import annotations

from multiprocessing.reduction import ForkingPickler

import torch

NOT_SHAREABLE = (
    "a neuron tensor was sent to another process through torch.multiprocessing, which cannot "
    "share neuron memory yet; send tensor.cpu() and move it to neuron in the receiving process")


def _raise_not_shareable(message: str):
    raise RuntimeError(message)


def install() -> None:
    """Puts a neuron check in front of torch.multiprocessing's storage reduction (the one every
    tensor reduction goes through); CPU and CUDA storages reduce as before."""
    # internal: see runtime/torch_internals.py "torch.multiprocessing.reductions.reduce_storage"
    from torch.multiprocessing import reductions

    torch_reduce_storage = reductions.reduce_storage

    def reduce_storage(storage):
        if storage.device.type == "neuron":
            return (_raise_not_shareable, (NOT_SHAREABLE,))
        return torch_reduce_storage(storage)

    ForkingPickler.register(torch.UntypedStorage, reduce_storage)
