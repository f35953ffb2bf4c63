"""`NeuronWorker`: one vLLM worker process per neuron device (tensor-parallel rank r runs on
`neuron:r`). It is vLLM CPU's worker with four differences: the device, the c10d backend
(`neuron`), the KV cache size, which comes from neuron memory (kv_cache_size.py) rather
than from the host's NUMA node, and the decode graphs its runner captures (decode_graphs.py)."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext

import torch
from vllm.config import CompilationMode, VllmConfig
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment

from . import kv_cache_size
from .model_runner import NeuronModelRunner

# Under vLLM's logger name, so that its handlers print our lines with its own.
logger = init_logger(f"vllm.{__name__}")


class NeuronWorker(CPUWorker):
    def __init__(self, vllm_config: VllmConfig, local_rank: int, rank: int,
                 distributed_init_method: str, is_driver_worker: bool = False):
        # The CPU worker's constructor binds host NUMA memory and reserves a share of it for
        # the KV cache; on neuron the cache is device memory, sized in determine_available_memory.
        Worker.__init__(self, vllm_config, local_rank, rank, distributed_init_method,
                        is_driver_worker=is_driver_worker)
        self.parallel_config.disable_custom_all_reduce = True

    def init_device(self) -> None:
        self.device = torch.device("neuron", self.local_rank)
        current_platform.set_device(self.device)
        current_platform.check_if_supports_dtype(self.model_config.dtype)
        init_worker_distributed_environment(self.vllm_config, self.rank,
                                            self.distributed_init_method, self.local_rank,
                                            current_platform.dist_backend)
        set_random_seed(self.model_config.seed)
        self.model_runner = NeuronModelRunner(self.vllm_config, self.device)

    def _maybe_get_memory_pool_context(self, tag: str) -> AbstractContextManager:
        # No sleep mode, so no allocator pools to tag (as on the CPU).
        return nullcontext()

    def determine_available_memory(self) -> int:
        if self._should_warm_up_model():
            self._warm_up()
        memory = kv_cache_size.device_memory(self.device)
        size = kv_cache_size.kv_cache_bytes(self.cache_config.kv_cache_memory_bytes, memory)
        how = "Explicitly set" if self.cache_config.kv_cache_memory_bytes else "Default"
        logger.info("%s %.2f GiB of %s memory for the KV cache (device free %.2f GiB, host "
                    "memory backing it %.2f GiB, from %s).", how, size / kv_cache_size.GiB,
                    self.device, memory.device_free / kv_cache_size.GiB,
                    memory.backing_available / kv_cache_size.GiB, memory.backing_source)
        return size

    def compile_or_warm_up_model(self):
        # The decode graphs are captured here, as on CUDA (after the KV cache exists, and after
        # a compiled model's warm-up); vLLM CPU's step then resets the random seed.
        self.model_runner.capture_model()
        return super().compile_or_warm_up_model()

    def _warm_up(self) -> None:
        """vLLM CPU's warm-up, which in compile mode is where torch.compile runs. Said before it
        starts: while this worker compiles, the engine waiting on it logs "No available shared
        memory broadcast block found in 60 seconds" every minute, which reads like a hang."""
        compiling = self.vllm_config.compilation_config.mode != CompilationMode.NONE
        if compiling:
            logger.info("Compiling the model with torch.compile (Inductor's C++ backend); a "
                        "first compile takes minutes on a few cores, later starts read vLLM's "
                        "compile cache. Meanwhile vLLM logs 'No available shared memory "
                        "broadcast block' each minute: it waits for this compile, it is not "
                        "hung (--enforce-eager starts without compiling).")
        start = time.monotonic()
        self.model_runner.warming_up_model()
        if compiling:
            logger.info("Compiled and warmed up in %.0f s.", time.monotonic() - start)
