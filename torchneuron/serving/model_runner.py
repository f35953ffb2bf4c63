"""`NeuronModelRunner`: vLLM's model runner with weights, KV cache and activations on neuron.

vLLM CPU's runner is the GPU runner with every device buffer replaced by its host half. This one
keeps the GPU runner's split instead: host buffers are staged and copied to the device each
step, as on CUDA, so the model, the attention metadata and the sampler all see neuron tensors.
What it keeps from the CPU runner: no CUDA graphs, no streams (the software NeuronCore is
synchronous), the CPU's model loading, warm-up and cache-block zeroing, and vLLM CPU's kernels
where vLLM picks them by platform (custom_ops.py, greedy.py, packed_linear.py).
"""

from __future__ import annotations

import torch
from vllm.config import VllmConfig
from vllm.v1.worker.cpu_model_runner import CPUModelRunner, _torch_cuda_wrapper
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

from . import custom_ops, greedy, packed_linear


class NeuronModelRunner(CPUModelRunner):
    def __init__(self, vllm_config: VllmConfig, device: torch.device):
        if device.type != "neuron":
            raise ValueError(f"NeuronModelRunner runs on a neuron device, got {device}")
        # Before the model is built: its custom ops pick their kernels at construction.
        custom_ops.install()
        greedy.install()
        packed_linear.install()
        # The GPU runner creates CUDA streams and events at construction; the placeholders
        # stand in for them (nothing is asynchronous to order on this device).
        with _torch_cuda_wrapper():
            GPUModelRunner.__init__(self, vllm_config, device)
        self.use_cuda_graph = False
