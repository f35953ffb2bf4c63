"""`NeuronModelRunner`: vLLM's model runner with weights, KV cache and activations on neuron.

vLLM CPU's runner is the GPU runner with every device buffer replaced by its host half. This one
keeps the GPU runner's split instead: host buffers are staged and copied to the device each
step, as on CUDA, so the model, the attention metadata and the sampler all see neuron tensors.
What it keeps from the CPU runner: no side streams, the CPU's model loading, warm-up and
cache-block zeroing, and vLLM CPU's kernels where vLLM picks them by platform (custom_ops.py,
greedy.py, packed_linear.py). What it takes from CUDA: decode graphs (decode_graphs.py), captured
for vLLM's capture sizes and dispatched by vLLM's CudagraphDispatcher, unless `enforce_eager`.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch
from vllm.compilation.monitor import set_cudagraph_capturing_enabled
from vllm.config import CUDAGraphMode, VllmConfig
from vllm.logger import init_logger
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

from . import custom_ops, decode_graphs, greedy, packed_linear

# Under vLLM's logger name, so that its handlers print our lines with its own.
logger = init_logger(f"vllm.{__name__}")


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
        decode_graphs.install()
        with _events_on_neuron():
            GPUModelRunner.__init__(self, vllm_config, device)
        self.use_cuda_graph = False

    def decode_graphs_enabled(self) -> bool:
        return self.compilation_config.cudagraph_mode != CUDAGraphMode.NONE

    def load_model(self, *args, **kwargs) -> None:
        super().load_model(*args, **kwargs)
        if self.decode_graphs_enabled():
            self.model = decode_graphs.NeuronGraphWrapper(self.model, self.vllm_config)

    def get_model(self) -> torch.nn.Module:
        return GPUModelRunner.get_model(self)  # unwraps the graph wrapper, as on CUDA

    # why: overrides the GPU runner's private hook (vllm 0.32), which the runner calls once the
    # attention backends exist, to set up its CudagraphDispatcher.
    def _check_and_update_cudagraph_mode(self, attention_backends, kv_cache_groups,
                                         is_profiling: bool = False) -> None:
        # vLLM resolves the graph mode against the attention backends' graph support, which
        # for vLLM CPU's attention is none: on neuron the attention runs eagerly between a
        # decode step's graphs (decode_graphs.py), so the platform's mode stands.
        self.cudagraph_dispatcher.initialize_cudagraph_keys(
            self.compilation_config.cudagraph_mode, self.uniform_decode_query_len)

    def capture_model(self) -> int:
        """Captures a decode graph for each of vLLM's capture sizes (largest first), as the GPU
        runner does, after a warm-up run of each; returns the neuron memory they hold."""
        if not self.decode_graphs_enabled():
            return 0
        start = time.perf_counter()
        torch.neuron.synchronize()
        before = torch.neuron.memory_allocated(self.device)
        # why: the GPU runner's capture_model, less its CUDA-only parts (CUDA streams in
        # `graph_capture`, the profiler's CUDA activity, encoder graphs, memory figures from
        # torch.cuda): its private `_freeze_gc` and `_warmup_and_capture` (vllm 0.32), and
        # vllm.compilation.monitor's capture switch, which vLLM's wrappers check.
        set_cudagraph_capturing_enabled(True)
        try:
            with self._freeze_gc():
                for mode, descs in self.cudagraph_dispatcher.get_capture_descs():
                    for desc in descs:
                        self._warmup_and_capture(desc, cudagraph_runtime_mode=mode)
        finally:
            set_cudagraph_capturing_enabled(False)
        torch.neuron.synchronize()
        held = torch.neuron.memory_allocated(self.device) - before
        logger.info("Captured neuron decode graphs for batch sizes %s in %.1f s (%.1f MiB).",
                    self.compilation_config.cudagraph_capture_sizes,
                    time.perf_counter() - start, held / (1 << 20))
        return held
