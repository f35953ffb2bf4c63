"""transformers' `pipeline(..., device=0)`, `pipeline(...)` with no device, and
`pipeline(..., device_map="auto")` on neuron.

transformers 5 turns an integer device (0 when none is given, or the first entry of an
accelerate device map) into `cuda:N`, `npu:N`, `xpu:N`... by asking each accelerator it knows in
turn, and into the CPU when none answers: it never asks for `neuron`, so the model ran on the CPU
without a word. Where neuron is the machine's accelerator and none of those answers, the integer
means `neuron:N`, as it means `cuda:N` on a GPU machine."""

from __future__ import annotations

import functools

import torch


def _neuron_is_the_accelerator() -> bool:
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return accelerator is not None and accelerator.type == "neuron"


def _neuron_index(device, hf_device_map) -> int | None:
    """The neuron index the integer `device` stands for, or None when it is not an index."""
    if device is None and hf_device_map is not None:
        device = next(iter(hf_device_map.values()))
    elif device is None:
        device = 0
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        return None
    return device


def fix_pipeline_device(base) -> None:
    """Wraps `Pipeline.__init__` of transformers.pipelines.base (given as `base`)."""
    # internal: see runtime/torch_internals.py "transformers.pipelines.base.Pipeline.__init__"
    original = base.Pipeline.__init__
    if getattr(original, "_torchneuron", False):
        return

    @functools.wraps(original)
    def __init__(self, model, *args, device=None, **kwargs):
        hf_device_map = getattr(model, "hf_device_map", None)
        index = _neuron_index(device, hf_device_map) if _neuron_is_the_accelerator() else None
        if index is not None and hf_device_map is None:
            device = torch.device("neuron", index)
        original(self, model, *args, device=device, **kwargs)
        if index is not None and hf_device_map is not None and self.device.type == "cpu":
            # The model already lies where the map put it; only inputs follow self.device.
            self.device = torch.device("neuron", index)

    __init__._torchneuron = True
    base.Pipeline.__init__ = __init__
