"""`NeuronModelRunner`: vLLM's model runner with weights, KV cache and activations on neuron.

vLLM CPU's runner is the GPU runner with every device buffer replaced by its host half. This one
keeps the GPU runner's split instead: host buffers are staged and copied to the device each
step, as on CUDA, so the model, the attention metadata and the sampler all see neuron tensors.
What it keeps from the CPU runner: no CUDA graphs, no side streams, the CPU's model loading,
warm-up and cache-block zeroing, and vLLM CPU's kernels where vLLM picks them by platform
(custom_ops.py, greedy.py, packed_linear.py).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from vllm.config import VllmConfig
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

from . import custom_ops, greedy, packed_linear


class _NoSideStream:
    """Stands in for the side CUDA streams the GPU runner creates (for overlapped copies, used
    with async scheduling and speculative decoding only): the runner's work stays on neuron's
    current stream."""

    def __init__(self, *args, **kwargs) -> None:
        self.device = torch.device("cpu")

    def wait_stream(self, *args, **kwargs) -> None:
        pass


@contextmanager
def _events_on_neuron():
    """The GPU runner's construction, with `torch.Event` left as it is (the current
    accelerator's event: neuron's) and CUDA streams stood in for. vLLM CPU's own wrapper also
    replaces the events with no-ops, which is right for the CPU only: with asynchronous execution
    (NEURON_EAGER_MODE=async) a copy of the sampled tokens into pinned memory is queued, and the
    runner's `transfer_event.synchronize()` is what waits for it before the tokens are read."""
    cuda_stream, cuda_event = torch.cuda.Stream, torch.cuda.Event
    try:
        torch.cuda.Stream, torch.cuda.Event = _NoSideStream, torch.Event
        yield
    finally:
        torch.cuda.Stream, torch.cuda.Event = cuda_stream, cuda_event


class NeuronModelRunner(CPUModelRunner):
    def __init__(self, vllm_config: VllmConfig, device: torch.device):
        if device.type != "neuron":
            raise ValueError(f"NeuronModelRunner runs on a neuron device, got {device}")
        # Before the model is built: its custom ops pick their kernels at construction.
        custom_ops.install()
        greedy.install()
        packed_linear.install()
        with _events_on_neuron():
            GPUModelRunner.__init__(self, vllm_config, device)
        self.use_cuda_graph = False
