"""vLLM's greedy sampling on neuron takes the CPU's kernel, `vllm._C.greedy_argmax`.

vLLM's sampler asks the platform: the CPU gets one `greedy_argmax` call, every other platform
`argmax(dim=-1).view(-1)` (two ops, the argmax a generic reduction). On the software
NeuronCore the CPU kernel is the right one, run on the neuron logits by torchneuron's boxed
fallback as vLLM's other CPU kernels are; it also breaks ties as vLLM CPU does, so both give
the same tokens. The choice is made by the logits' device, so a process whose platform is not
neuron keeps vLLM's own path.
"""

from __future__ import annotations

import torch
from vllm.v1.sample.sampler import Sampler

from .vllm_kernels import greedy_argmax

_vllm_greedy_sample = Sampler.greedy_sample


def _greedy_sample(logits: torch.Tensor) -> torch.Tensor:
    # The kernel takes float32 only; vLLM's sampler casts the logits to float32 before this.
    if logits.device.type == "neuron" and logits.dtype == torch.float32:
        return greedy_argmax(logits)
    return _vllm_greedy_sample(logits)


def install() -> None:
    if Sampler.greedy_sample is _vllm_greedy_sample:
        Sampler.greedy_sample = staticmethod(_greedy_sample)
