"""`NeuronPlatform`: vLLM's view of the device `neuron`.

The software NeuronCore runs CPU kernels on device memory, so the fastest kernels vLLM has for it
are its CPU ones (the `vllm._C` attention, cache and sampling ops, which torchneuron's boxed
fallback runs on neuron tensors). The platform therefore takes vLLM CPU's rules (block size,
executor, attention backend, compile settings, kernels) and changes what makes it a device of its
own: the device type and dispatch key, the c10d backend, memory figures from `torch.neuron`,
and a worker whose model runner keeps weights, KV cache and activations in neuron memory.
It is an out-of-tree platform (PlatformEnum.OOT), as vllm-ascend's and vllm-gaudi's are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from vllm.platforms.cpu import CpuPlatform
from vllm.platforms.interface import PlatformEnum

from . import host_cache

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.config.kernel import IrOpPriorityConfig

WORKER_CLS = "torchneuron.serving.worker.NeuronWorker"

# Every vLLM process (front end, engine core, workers) imports this module when it resolves its
# platform, and each of them runs vLLM's shutdown.
host_cache.install()


class NeuronPlatform(CpuPlatform):
    _enum = PlatformEnum.OOT
    device_name: str = "neuron"
    device_type: str = "neuron"
    dispatch_key: str = "PrivateUse1"
    dist_backend: str = "neuron"
    # The variable vLLM sets where it narrows a worker's devices (as CUDA_VISIBLE_DEVICES under
    # Ray); torchneuron reads it (runtime/config.py).
    device_control_env_var: str = "NEURON_RT_VISIBLE_CORES"

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.neuron.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.neuron.get_device_properties(device_id).total_memory

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.neuron.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.neuron.manual_seed_all(seed)

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype) -> None:
        if dtype not in cls().supported_dtypes:
            raise ValueError(f"{dtype} is not supported on neuron; supported: "
                             f"{cls().supported_dtypes}")

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        return float(torch.neuron.memory_allocated(device))

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        # vLLM's base communicator runs every collective through torch.distributed on the
        # device group, whose backend is torchneuron's `neuron` (dist_backend above). The CPU's
        # shared-memory communicator would bypass it.
        return ("vllm.distributed.device_communicators.base_device_communicator."
                "DeviceCommunicatorBase")

    @classmethod
    def import_ir_kernels(cls) -> None:
        super().import_ir_kernels()
        from . import ir_kernels  # noqa: F401  (registers its IR op implementations)

    @classmethod
    def get_default_ir_op_priority(cls, vllm_config: VllmConfig) -> IrOpPriorityConfig:
        # CUDA's rule (vllm/platforms/cuda.py): compiled kernels where nothing is compiled, the
        # PyTorch-native form where Inductor generates code from it. Neuron's compiled kernels
        # are vLLM CPU's (ir_kernels.py); vLLM CPU itself always takes the native form.
        from vllm.config.compilation import CompilationMode
        from vllm.config.kernel import IrOpPriorityConfig

        from .ir_kernels import OPS, PROVIDER

        compilation = vllm_config.compilation_config
        if compilation.backend == "inductor" and compilation.mode != CompilationMode.NONE:
            return IrOpPriorityConfig.with_default(["native"])
        return IrOpPriorityConfig.with_default(
            ["native"], **{op: [PROVIDER, "native"] for op in OPS})

    @classmethod
    def support_static_graph_mode(cls) -> bool:
        # Neuron captures decode graphs (decode_graphs.py): vLLM then resolves the graph mode
        # and capture sizes as on CUDA (`enforce_eager` turns them off), and
        # check_and_update_config below keeps what neuron captures.
        return True

    @classmethod
    def check_and_update_config(cls, vllm_config: VllmConfig) -> None:
        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = WORKER_CLS
        compilation = vllm_config.compilation_config
        # vLLM CPU's rules clear the capture sizes vLLM resolved: kept for the decode graphs.
        capture_sizes = list(compilation.cudagraph_capture_sizes or [])
        # vLLM CPU's rules all apply here; the one line that does not is its check that the
        # device type is "cpu", so it sees "cpu" for the length of the call.
        device_config = vllm_config.device_config
        device_type = device_config.device_type
        device_config.device_type = "cpu"
        try:
            super().check_and_update_config(vllm_config)
        finally:
            device_config.device_type = device_type
        # vLLM turns on Inductor's combo kernels for every platform but the CPU; they need a
        # backend that benchmarks fused nodes, which Inductor's C++ backend (neuron's, as the
        # CPU's) does not have. The CPU never gets them; neither does neuron.
        inductor_config = vllm_config.compilation_config.inductor_compile_config
        inductor_config["combo_kernels"] = False
        inductor_config.pop("benchmark_combo_kernel", None)
        cls._decode_graphs(vllm_config, capture_sizes)

    @classmethod
    def _decode_graphs(cls, vllm_config: VllmConfig, capture_sizes: list[int]) -> None:
        """Neuron captures graphs of uniform decode batches (FULL_DECODE_ONLY), whatever graph
        mode vLLM resolved other than NONE (`enforce_eager`, `cudagraph_mode=NONE`): vLLM's
        piecewise graphs need its own compilation mode, which neuron runs as vLLM CPU does
        (whole-model torch.compile, no splitting), and mixed prefill-decode batches run eagerly,
        as vLLM runs them on CUDA under FULL_DECODE_ONLY. The capture sizes are vLLM's, up to
        the largest decode batch (max_num_seqs).

        A compiled model (vLLM's default mode) and an uncompiled one (`compilation_config` mode
        0) are captured alike: a graph records the compiled model's Inductor kernels and the ops
        its code calls, oneDNN's `mkldnn::_linear_pointwise` included (an op outside ATen, which
        neuron captures in the signatures vLLM's warm-up ran before the capture). A model split
        over several devices (tensor or pipeline parallel) runs without graphs: its collectives
        wait for the device on the host, which a capture refuses. Speculative decoding, LoRA,
        encoder-decoder and pooling models run without graphs too (not tried on neuron)."""
        from vllm.config import CUDAGraphMode

        compilation = vllm_config.compilation_config
        model_config = vllm_config.model_config
        max_decode = vllm_config.scheduler_config.max_num_seqs
        sizes = sorted({s for s in capture_sizes if 1 <= s <= max_decode})
        if (compilation.cudagraph_mode in (None, CUDAGraphMode.NONE) or not sizes
                or model_config is None or model_config.enforce_eager
                or vllm_config.parallel_config.world_size > 1
                or vllm_config.speculative_config is not None
                or vllm_config.lora_config is not None
                or model_config.is_encoder_decoder or model_config.pooler_config is not None):
            compilation.cudagraph_mode = CUDAGraphMode.NONE
            compilation.cudagraph_capture_sizes = []
            compilation.max_cudagraph_capture_size = 0
            return
        compilation.cudagraph_mode = CUDAGraphMode.FULL_DECODE_ONLY
        compilation.cudagraph_capture_sizes = sizes
        compilation.max_cudagraph_capture_size = sizes[-1]
