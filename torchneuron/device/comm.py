"""Copies between neuron devices for single-process data parallelism (`nn.DataParallel`,
`nn.parallel.data_parallel`), shaped like `torch.cuda.comm`: broadcast, broadcast_coalesced,
scatter, gather, reduce_add(_coalesced).

`torch.nn.parallel.comm` hands the work to `torch._C._scatter`, `_gather`, `_broadcast` and
`_broadcast_coalesced`, which PyTorch compiles only into CUDA builds; without them DataParallel
fails on any other device with a bare AttributeError. In a build without them the integer device
indices comm passes can only mean the accelerator, neuron, so `install()` provides them there:
the same results as CUDA's (the source device's broadcast returns its own tensors; scatter and
gather copy chunks), made with ordinary copies on the current stream, which the software
NeuronCore runs in order. replicate, parallel_apply and autograd's Broadcast / Scatter / Gather
functions are PyTorch's own and already device-agnostic.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch.nn.parallel import comm as _nn_comm

# The public functions, as torch.cuda.comm exports them (they are nn.parallel.comm's).
broadcast = _nn_comm.broadcast
broadcast_coalesced = _nn_comm.broadcast_coalesced
reduce_add = _nn_comm.reduce_add
reduce_add_coalesced = _nn_comm.reduce_add_coalesced
scatter = _nn_comm.scatter
gather = _nn_comm.gather

__all__ = ["broadcast", "broadcast_coalesced", "reduce_add", "reduce_add_coalesced", "scatter",
           "gather"]

def _device(index: int) -> torch.device:
    if index < 0:
        return torch.device("cpu")
    return torch.device("neuron", index)


def _index(device) -> int:
    """A destination as reduce_add takes it (an index, a device, a string; None: current)."""
    if isinstance(device, int):
        return device
    if device is None or torch.device(device).index is None:
        return torch.neuron.current_device()
    return torch.device(device).index


def _check(tensor: torch.Tensor, what: str) -> None:
    if tensor.device.type not in ("neuron", "cpu"):
        raise RuntimeError(f"{what}: expected neuron (or CPU) tensors in this PyTorch build, "
                           f"got a tensor on {tensor.device}")


def _broadcast_impl(tensor: torch.Tensor, devices: Sequence[int]) -> list[torch.Tensor]:
    _check(tensor, "broadcast")
    return [tensor if tensor.device == _device(d) else tensor.to(_device(d)) for d in devices]


def _broadcast_out_impl(tensor: torch.Tensor, out: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    _check(tensor, "broadcast")
    for o in out:
        if o.shape != tensor.shape:
            raise RuntimeError(f"broadcast: output of shape {tuple(o.shape)} does not match the "
                               f"input's {tuple(tensor.shape)}")
        o.copy_(tensor)
    return list(out)


def _broadcast_coalesced_impl(tensors: Sequence[torch.Tensor], devices: Sequence[int],
                              buffer_size: int) -> list[list[torch.Tensor]]:
    """As CUDA's: the first device must hold the tensors and gets them back as they are; every
    other device gets copies (each its own tensor: no version counter is shared)."""
    if not devices:
        raise RuntimeError("broadcast_coalesced: no devices given")
    source = _device(devices[0])
    for t in tensors:
        _check(t, "broadcast_coalesced")
        if t.device != source:
            raise RuntimeError(f"broadcast_coalesced: all tensors must be on devices[0] "
                               f"({source}), got one on {t.device}")
    return [list(tensors) if i == 0 else [t.to(_device(d)) for t in tensors]
            for i, d in enumerate(devices)]


def _chunks(tensor: torch.Tensor, count: int, chunk_sizes, dim: int) -> tuple[torch.Tensor, ...]:
    if chunk_sizes is None:
        return tensor.chunk(count, dim)
    chunk_sizes = list(chunk_sizes)
    if len(chunk_sizes) != count:
        raise RuntimeError(f"scatter: {len(chunk_sizes)} chunk sizes for {count} devices")
    if sum(chunk_sizes) != tensor.size(dim):
        raise RuntimeError(f"scatter: chunk sizes {chunk_sizes} do not sum to the tensor's "
                           f"size {tensor.size(dim)} in dimension {dim}")
    return tensor.split(chunk_sizes, dim)


def _scatter_impl(tensor: torch.Tensor, devices: Sequence[int], chunk_sizes, dim: int,
                  streams) -> list[torch.Tensor]:
    """Chunk i on device i (a view where the chunk is already there, as CUDA's `.to`). Copies go
    on the current stream: Scatter waits on `streams` after, which is then a no-op."""
    _check(tensor, "scatter")
    chunks = _chunks(tensor, len(devices), chunk_sizes, dim)
    return [c.to(_device(d), non_blocking=True) for c, d in zip(chunks, devices)]


def _scatter_out_impl(tensor: torch.Tensor, out: Sequence[torch.Tensor], dim: int,
                      streams) -> list[torch.Tensor]:
    _check(tensor, "scatter")
    chunks = _chunks(tensor, len(out), [o.size(dim) for o in out], dim)
    for c, o in zip(chunks, out):
        o.copy_(c)
    return list(out)


def _gather_impl(tensors: Sequence[torch.Tensor], dim: int, destination: int | None
                 ) -> torch.Tensor:
    if not tensors:
        raise RuntimeError("gather: expected at least one tensor")
    for t in tensors:
        _check(t, "gather")
    dest = _device(torch.neuron.current_device() if destination is None else destination)
    return torch.cat([t.to(dest) for t in tensors], dim)


def _gather_out_impl(tensors: Sequence[torch.Tensor], out: torch.Tensor, dim: int
                     ) -> torch.Tensor:
    return torch.cat([t.to(out.device) for t in tensors], dim, out=out)


def _reduce_add(inputs, destination=None):
    """nn.parallel.comm.reduce_add without its NCCL probe for neuron tensors: the probe warns
    "not compiled with NCCL support" on every backward of a DataParallel step."""
    if not all(isinstance(t, torch.Tensor) and t.device.type == "neuron" for t in inputs):
        return _ORIGINAL_REDUCE_ADD(inputs, destination)
    index = _index(destination)
    root = next((i for i, t in enumerate(inputs) if t.get_device() == index), None)
    if root is None:
        raise RuntimeError(f"reduce_add: the destination neuron:{index} holds none of the inputs")
    shape = inputs[0].shape
    for i, t in enumerate(inputs):
        if t.shape != shape:
            raise ValueError(f"reduce_add: input {i} has shape {tuple(t.shape)}, expected "
                             f"{tuple(shape)}")
    if len(inputs) == 1:
        return inputs[0]
    dest = _device(index)
    others = [t for i, t in enumerate(inputs) if i != root]
    result = inputs[root] + others[0].to(dest)
    for other in others[1:]:
        result.add_(other.to(dest))
    return result


_ORIGINAL_REDUCE_ADD = _nn_comm.reduce_add


_IMPLS = {"_broadcast": _broadcast_impl, "_broadcast_out": _broadcast_out_impl,
          "_broadcast_coalesced": _broadcast_coalesced_impl, "_scatter": _scatter_impl,
          "_scatter_out": _scatter_out_impl, "_gather": _gather_impl,
          "_gather_out": _gather_out_impl}


def _on_cuda(first) -> bool:
    """Whether the call's first argument (a tensor, or a sequence of them) is on CUDA."""
    tensor = first if isinstance(first, torch.Tensor) else next(
        (t for t in first if isinstance(t, torch.Tensor)), None)
    return tensor is not None and tensor.device.type == "cuda"


def _by_device(impl, cuda_impl):
    """In a CUDA build (PyPI's torch 2.14.1, used on the CPU): CUDA tensors keep CUDA's
    function, neuron and CPU tensors take neuron's."""
    def call(first, *args, **kwargs):
        return (cuda_impl if _on_cuda(first) else impl)(first, *args, **kwargs)

    call._neuron_comm = True  # type: ignore[attr-defined]
    return call


def install() -> None:
    """Provide the comm entry points for neuron: in a build without them (the 2.13.0 CPU wheel)
    they are neuron's; in a CUDA build, CUDA's serve CUDA tensors (see the docstring)."""
    for name, impl in _IMPLS.items():
        # internal: see runtime/torch_internals.py "torch._C._scatter"
        original = getattr(torch._C, name, None)
        if getattr(original, "_neuron_comm", False):
            continue
        setattr(torch._C, name, impl if original is None else _by_device(impl, original))
    # internal: see runtime/torch_internals.py "torch.nn.parallel.comm.reduce_add"
    _nn_comm.reduce_add = _reduce_add
