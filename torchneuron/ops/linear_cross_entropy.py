"""F.linear_cross_entropy's chunked path picks its accumulation per device type: float32 for
float16/bfloat16 inputs on the CPU and on CUDA, the input dtype on devices it does not know
(torch/nn/modules/linear_cross_entropy_options.py). Neuron's kernels are the CPU's, and a
NeuronCore accumulates matrix products in float32, so neuron takes the CPU's choice. Without
it a bfloat16 loss was accumulated in bfloat16 on neuron and differed from the CPU's by up to
0.03 (152 cases of the op battery)."""

from __future__ import annotations

import torch
from torch.nn.modules import linear_cross_entropy_options as _options

_CPU = torch.device("cpu")


def apply() -> None:
    """Gives neuron the CPU's automatic accumulation dtype and chunking defaults."""
    # torch 2.13 keeps its picks in a table per (device type, dtype); 2.14 replaced the table
    # with a function of the same pair (runtime/torch_internals.py records both).
    if hasattr(_options, "_AUTO_DEFAULTS"):
        # internal: see runtime/torch_internals.py "_AUTO_DEFAULTS"
        defaults = _options._AUTO_DEFAULTS
        for dtype in (torch.float16, torch.bfloat16):
            defaults.setdefault(("neuron", dtype), defaults[("cpu", dtype)])
    else:
        _answer_neuron_as_cpu_in_auto_acc_policy()
    cls = _options.LinearCrossEntropyOptions
    resolve = cls._resolve_auto_acc_dtype
    if getattr(resolve, "_neuron_as_cpu", False):
        return

    def resolve_auto_acc_dtype(dtype: torch.dtype, device: torch.device | None):
        if device is not None and device.type == "neuron":
            device = _CPU
        return resolve(dtype, device)

    resolve_auto_acc_dtype._neuron_as_cpu = True  # type: ignore[attr-defined]
    # internal: see runtime/torch_internals.py "LinearCrossEntropyOptions._resolve_auto_acc_dtype"
    cls._resolve_auto_acc_dtype = staticmethod(resolve_auto_acc_dtype)


def _answer_neuron_as_cpu_in_auto_acc_policy() -> None:
    # internal: see runtime/torch_internals.py "_auto_acc_policy"
    policy = _options._auto_acc_policy
    if getattr(policy, "_neuron_as_cpu", False):
        return

    def auto_acc_policy(device_type: str | None, dtype: torch.dtype) -> str:
        return policy("cpu" if device_type == "neuron" else device_type, dtype)

    auto_acc_policy._neuron_as_cpu = True  # type: ignore[attr-defined]
    _options._auto_acc_policy = auto_acc_policy
