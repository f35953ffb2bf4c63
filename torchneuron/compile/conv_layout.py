"""The memory format a traced neuron convolution is predicted to answer in: the CPU's.

Neuron's convolution runs the CPU convolution on neuron memory (csrc/aten/native/Convolution.cpp),
so it answers in whatever layout the CPU kernel picks (channels-last for a channels-last input, a
choice that also depends on the thread count and oneDNN). The fake-tensor rule PyTorch traces
with asks ATen which layout a PrivateUse1 convolution ("Overrideable" backend) gives and always
hears "contiguous". A compiled graph then plans on strides the kernel does not produce: Inductor's
stride check fails, or its layout optimization adds copies for nothing. This rule answers for
neuron what the CPU rule answers for the same shapes and strides, which is what the kernel does.
"""

from __future__ import annotations

from typing import Any

import torch
# internal: see runtime/torch_internals.py "fake_impls.op_implementations_dict"
# internal: see runtime/torch_internals.py "torch._subclasses.FakeTensor"
# internal: see runtime/torch_internals.py "_pytree.tree_map"
from torch._subclasses import fake_impls
from torch.utils._pytree import tree_map

DEVICE_TYPE = "neuron"
_CONV_OPS = (
    torch.ops.aten.convolution.default,
    torch.ops.aten._convolution.default,
    torch.ops.aten._convolution.deprecated,
    torch.ops.aten.convolution_backward.default,
)


def _is_neuron_fake(t: Any) -> bool:
    return isinstance(t, torch._subclasses.FakeTensor) and t.fake_device.type == DEVICE_TYPE


def _with_layout_of_cpu(cpu_rule):
    def neuron_conv(fake_mode, func, *args, **kwargs):
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        if not tensors or not _is_neuron_fake(tensors[0]):
            return cpu_rule(fake_mode, func, *args, **kwargs)
        device = tensors[0].fake_device

        def as_cpu(t):
            if not _is_neuron_fake(t):
                return t
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")

        def as_neuron(t):
            if not isinstance(t, torch.Tensor):
                return t
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)

        with fake_mode:
            cpu_args, cpu_kwargs = tree_map(as_cpu, (args, kwargs))
        out = cpu_rule(fake_mode, func, *cpu_args, **cpu_kwargs)
        with fake_mode:
            return tree_map(as_neuron, out)

    neuron_conv.cpu_rule = cpu_rule  # type: ignore[attr-defined]
    return neuron_conv


def install() -> None:
    """Route neuron convolutions in PyTorch's fake-tensor rule table through the CPU's rule
    (idempotent; other devices keep the rule they had)."""
    for op in _CONV_OPS:
        rule = fake_impls.op_implementations_dict[op]
        if not hasattr(rule, "cpu_rule"):
            fake_impls.op_implementations_dict[op] = _with_layout_of_cpu(rule)
