"""nn.LSTM / nn.GRU / nn.RNN on neuron run the CPU's whole recurrent op, as the CPU does.

ATen's recurrent ops are composite: on the CPU the whole sequence takes one path (oneDNN's RNN
primitive, forward and backward), while any other device decomposes them into a cell per time
step and layer (csrc/aten/native/RnnCells.cpp on neuron): hundreds of small ops per call, 7x the
CPU's time for a small LSTM language model, and other arithmetic (results differ in the last
bits). So each op in op_lists.RECURRENT_OPS is registered for neuron (for autograd and below it)
as: copy the arguments to the CPU, run the same op there, copy the results back. The copies are
differentiable (`Tensor.to`), so autograd records the CPU op's own backward between them and
gradients reach the neuron parameters; forward and backward are then the CPU's, bit for bit.

Dropout between layers draws from the CPU generator inside the op. With NEURON_RNG=cpu that is
the stream it should draw from; otherwise its seed comes from the neuron device's generator (a
replayed device state replays the masks) and the CPU's state is restored after, so the CPU's
random stream is left as it was.
"""

from __future__ import annotations

import torch

from .._C import device as _device_c
from .op_lists import RECURRENT_OPS

_library: torch.library.Library | None = None


def _to_cpu(value, devices: list[torch.device]):
    if isinstance(value, torch.Tensor):
        if value.device.type == "neuron":
            devices.append(value.device)
        return value.to("cpu")
    if isinstance(value, (list, tuple)):
        return [_to_cpu(v, devices) for v in value]
    return value


def _has_subclass(value) -> bool:
    if isinstance(value, torch.Tensor):
        return type(value) not in (torch.Tensor, torch.nn.Parameter)
    if isinstance(value, (list, tuple)):
        return any(_has_subclass(v) for v in value)
    return False


def _seed_from_device_generator(device: torch.device) -> int:
    """A seed for the op's dropout masks, taken from the device's generator as a random op of
    its own would take its numbers: its (seed, offset) now, the offset then moved on (no device
    work and no synchronization, unlike drawing a number)."""
    gen = _device_c.default_generator(device.index)
    offset = gen.get_offset()
    gen.set_offset(offset + 4)
    return (gen.initial_seed() * 0x9E3779B97F4A7C15 + offset) % 2**63


def _kernel(op_name: str):
    base, overload = op_name.split(".")
    op = getattr(getattr(torch.ops.aten, base), overload)
    # internal: see runtime/torch_internals.py "torch._C._len_torch_dispatch_stack"
    names = [a.name for a in op._schema.arguments]
    dropout_at, train_at = names.index("dropout"), names.index("train")
    cpu_generator = torch.default_generator

    def run_on_cpu(*args):
        # internal: see runtime/torch_internals.py "torch._C._len_torch_dispatch_stack"
        if torch._C._len_torch_dispatch_stack() > 0 or _has_subclass(args):
            # traced (torch.compile's fake tensors, functionalization): the composite, as
            # before, which the compiler lowers
            return op.decompose(*args)
        devices: list[torch.device] = []
        cpu_args = [_to_cpu(a, devices) for a in args]  # the dispatcher came here for one
        if args[dropout_at] > 0 and args[train_at] and not _device_c.draws_from_cpu_generator():
            seed = _seed_from_device_generator(devices[0])
            state = cpu_generator.get_state()
            cpu_generator.manual_seed(seed)
            try:
                results = op(*cpu_args)
            finally:
                cpu_generator.set_state(state)
        else:
            results = op(*cpu_args)
        return tuple(r.to(devices[0]) for r in results)

    return run_on_cpu


def apply() -> None:
    """Register the kernels once (torchneuron/__init__.py)."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    for name in RECURRENT_OPS:
        kernel = _kernel(name)
        # Autograd's key, so the composite is not decomposed for a tensor that needs gradients;
        # the backend's, for inference mode (which skips autograd's keys).
        for key in ("AutogradPrivateUse1", "PrivateUse1"):
            _library.impl(name, kernel, key)
