"""The one table of what `torchneuron port` looks for: each code, what it means, what the fix
writes or, where no exact rewrite exists, the hint. The scanner and the docs read this file;
nothing else names a code.

A rewrite is "exact" when the new code does what the old did on a CUDA machine, and also runs
unchanged on neuron and on a machine with no accelerator at all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    code: str
    title: str  # one line: what was found
    fix: str | None  # what `port fix` writes, when it can
    hint: str  # what to do by hand when it cannot
    inert: bool = False  # left as it is, it still runs on other devices (a switch, a name)


def _rules(*rows: Rule) -> dict[str, Rule]:
    return {r.code: r for r in rows}


RULES = _rules(
    # --- device placement and device strings --------------------------------------------------
    Rule("TNP001", "`.cuda()` moves to CUDA",
         "`.to(torch.accelerator.current_accelerator(check_available=True))`",
         "for an index `i` use `.to(torch.device(torch.accelerator.current_accelerator(check_available=True).type, "
         "i))`; for a storage in `map_location`, pass `map_location=` the device instead"),
    Rule("TNP002", "device string 'cuda' where a device is expected",
         "the current accelerator (`torch.accelerator.current_accelerator(check_available=True)`, or its `.type`)",
         "name the device with `torch.accelerator.current_accelerator(check_available=True)`"),
    Rule("TNP003", "`.is_cuda` tests for CUDA", None,
         "compare `x.device.type` with `torch.accelerator.current_accelerator(check_available=True).type`"),
    Rule("TNP004", "device-type test against the string 'cuda'",
         "a test of the device's own type (`torch.device(d).type`, `!= \"cpu\"`)",
         "test the device's own type, `torch.device(d).type != \"cpu\"` (on neuron the test "
         "is False: autocast, pinning or fused optimizers would silently switch off)"),
    Rule("TNP005", "command-line option defaults to or offers 'cuda'",
         "default becomes the current accelerator's type",
         "add the accelerator's type (`torch.accelerator.current_accelerator(check_available=True).type`) to "
         "`choices`"),
    Rule("TNP006", "legacy CUDA tensor type (`torch.cuda.FloatTensor`, ...)", None,
         "use `torch.tensor(..., dtype=..., device=...)` and `x.dtype` / `x.device` checks"),
    Rule("TNP007", "`pin_memory_device=\"cuda\"`",
         "argument removed: DataLoader pins for the current accelerator",
         "drop `pin_memory_device`; `pin_memory=True` pins for the current accelerator"),
    Rule("TNP008", "string 'cuda' outside a known device position", None,
         "if it names a device, use `torch.accelerator.current_accelerator(check_available=True).type`"),
    Rule("TNP009", "integer device (`.to(rank)`): the current accelerator, an error without one",
         "`torch.device(<accelerator type>, i)`",
         "pass `torch.device(<accelerator type>, i)`"),
    # --- the torch.cuda runtime API -----------------------------------------------------------
    Rule("TNP101", "`torch.cuda.is_available()`", "`torch.accelerator.is_available()`", ""),
    Rule("TNP102", "`torch.cuda.device_count()`", "`torch.accelerator.device_count()`", ""),
    Rule("TNP103", "`torch.cuda.set_device()`", "`torch.accelerator.set_device_index()`", ""),
    Rule("TNP104", "`torch.cuda.current_device()`",
         "`torch.accelerator.current_device_index()`", ""),
    Rule("TNP105", "`torch.cuda.synchronize()`", "`torch.accelerator.synchronize()`", ""),
    Rule("TNP106", "`torch.cuda.empty_cache()`", "`torch.accelerator.empty_cache()`", ""),
    Rule("TNP107", "`torch.cuda` memory statistics",
         "the `torch.accelerator` function of the same name",
         "no device-agnostic form: `torch.get_device_module()` has it on devices that keep it"),
    Rule("TNP108", "`torch.cuda.Event`", "`torch.Event`",
         "pass the arguments by keyword to `torch.Event`"),
    Rule("TNP109", "`torch.cuda` streams", "`torch.Stream`, `torch.accelerator.current_stream()`",
         "use `torch.Stream` / `torch.accelerator.current_stream()`; `with stream:` sets it"),
    Rule("TNP110", "`torch.cuda.manual_seed(_all)`",
         "removed where a `torch.manual_seed` of the same seed is next to it (it seeds every "
         "device), else `torch.get_device_module().manual_seed(_all)` where an accelerator is",
         "`torch.manual_seed(s)` seeds every device (and the CPU)"),
    Rule("TNP111", "`torch.cuda.device()` context", "`torch.accelerator.device_index()`",
         "`torch.accelerator.device_index(i)` takes an index"),
    Rule("TNP112", "CUDA device properties (name, capability, bf16 support)",
         "`torch.get_device_module().<query>()`, with a value for no accelerator unless the code "
         "already tests for one",
         "query `torch.get_device_module()` where an accelerator is known to be available"),
    Rule("TNP113", "`torch.cuda` RNG state", None,
         "use `torch.get_device_module().get_rng_state()` or "
         "`torch.random.fork_rng(device_type=...)`"),
    Rule("TNP114", "CUDA graphs", None, "use `torch.accelerator.Graph`, or drop the graph capture"),
    Rule("TNP115", "NVTX ranges", None, "use `torch.profiler.record_function`"),
    Rule("TNP116", "`torch.cuda.OutOfMemoryError`", "`torch.OutOfMemoryError`", ""),
    Rule("TNP199", "other `torch.cuda` API", None,
         "use `torch.accelerator` or `torch.get_device_module()`"),
    # --- automatic mixed precision ------------------------------------------------------------
    Rule("TNP201", "`torch.cuda.amp.autocast`",
         "`torch.amp.autocast(device_type=<accelerator type>, ...)`",
         "use `torch.amp.autocast(device_type=...)`"),
    Rule("TNP202", "`torch.cuda.amp.GradScaler`", "`torch.amp.GradScaler(<accelerator type>, ...)`",
         "use `torch.amp.GradScaler(device)`"),
    Rule("TNP203", "`torch.cuda.amp.custom_fwd` / `custom_bwd`",
         "`torch.amp.custom_fwd(device_type=<accelerator type>, ...)`",
         "use `torch.amp.custom_fwd(device_type=...)`"),
    # --- CUDA backend switches ----------------------------------------------------------------
    Rule("TNP301", "`torch.backends.cudnn.benchmark`", None,
         "a cuDNN autotuner switch: no effect on other devices, safe to keep or drop", inert=True),
    Rule("TNP302", "`torch.backends.cudnn.deterministic`", None,
         "use `torch.use_deterministic_algorithms(True)` for every device", inert=True),
    Rule("TNP303", "`torch.backends.cuda.matmul.allow_tf32`", None,
         "use `torch.set_float32_matmul_precision(\"high\")` (it applies to every device)",
         inert=True),
    Rule("TNP304", "`torch.backends.cudnn.allow_tf32`", None,
         "a cuDNN convolution switch: no effect on other devices", inert=True),
    Rule("TNP305", "CUDA attention-kernel selection (`sdp_kernel`, `enable_flash_sdp`, ...)", None,
         "use `torch.nn.attention.sdpa_kernel([...])`", inert=True),
    Rule("TNP306", "other `torch.backends.cuda` / `cudnn` setting", None,
         "a CUDA-only switch: no effect on other devices", inert=True),
    # --- torch.compile ------------------------------------------------------------------------
    Rule("TNP401", "`torch.compile` mode tuned for CUDA (max-autotune, reduce-overhead)", None,
         "max-autotune's Triton GEMM templates do not apply off CUDA; both modes capture device "
         "graphs on neuron only with `backend=\"neuron\"` (a bare `torch.compile` runs them "
         "without)"),
    Rule("TNP402", "Triton", None,
         "Triton kernels run on GPUs only: keep a PyTorch fallback for other devices"),
    # --- distributed --------------------------------------------------------------------------
    Rule("TNP501", "NCCL process-group backend",
         "the device's default backend: `dist.get_default_backend_for_device(<accelerator>)`",
         "use `torch.distributed.get_default_backend_for_device(device)` (NCCL on CUDA)"),
    Rule("TNP502", "DDP `device_ids` / `output_device` (CUDA modules only)",
         "`[...] if torch.accelerator.is_available() else None`",
         "pass `device_ids` only when the module is on an accelerator"),
    Rule("TNP503", "`nn.DataParallel` / `nn.parallel.data_parallel` (one process, all devices)",
         None,
         "runs on CUDA and neuron devices (and as a plain call without an accelerator); "
         "`DistributedDataParallel` (one process per device) is faster and runs on every "
         "accelerator", inert=True),
    # --- environment --------------------------------------------------------------------------
    Rule("TNP601", "`CUDA_VISIBLE_DEVICES`", None,
         "device visibility is per backend: neuron reads `NEURON_RT_VISIBLE_CORES`", inert=True),
    Rule("TNP602", "NCCL environment variable", None,
         "NCCL settings affect CUDA only; the neuron backend ignores them", inert=True),
    Rule("TNP603", "other CUDA environment variable", None,
         "CUDA-only setting: it has no effect on other devices", inert=True),
)

# --- canonical expressions the fixes write ----------------------------------------------------
# `current_accelerator()` is None without an accelerator; `.to(None)` and `device=None` in torch
# factories mean "leave it / the default", so ACCEL is enough there. Everywhere else a real device
# or type string is needed, so the fallback to the CPU is spelled out (DEVICE).
# The fixes write them as placeholder names; hoist.py writes the expression in their place, or,
# in a function or module that uses them more than once, one name bound to DEVICE once.
ACCEL_TEXT = "torch.accelerator.current_accelerator(check_available=True)"
AVAILABLE = "torch.accelerator.is_available()"
ACCEL = "__tnp_accelerator__"
_DEVICE = {'"': "__tnp_device_dq__", "'": "__tnp_device_sq__"}  # by the quote of its "cpu"
PLACEHOLDERS = {ACCEL: None, **{name: quote for quote, name in _DEVICE.items()}}
HOIST_NAMES = ("accelerator", "accelerator_device", "current_accelerator_device")


def device_text(quote: str = '"') -> str:
    return f"{ACCEL_TEXT} or torch.device({quote}cpu{quote})"


def device_expr(quote: str = '"') -> str:
    return _DEVICE[quote]


def device_type_expr(quote: str = '"') -> str:
    return f"{device_expr(quote)}.type"


GUARDED_TYPE = f"{ACCEL}.type"  # only under an availability test


# --- the torch.cuda API -----------------------------------------------------------------------
@dataclass(frozen=True)
class Api:
    code: str
    target: str | None = None  # dotted replacement; None: a finding with a hint only
    kind: str = "rename"  # how the call is rewritten (see cuda_api._fix_api_call)
    absent: str | None = None  # the target raises without an accelerator: what to do instead
    bare: bool = False  # an uncalled reference (`f = torch.cuda.synchronize`) may be renamed
    guarded_only: bool = False  # no `absent` value makes sense: rewritten only under a guard


_A = "torch.accelerator."
_DM = "torch.get_device_module()."
_MEM_ZERO = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")

CUDA_API: dict[str, Api] = {
    "is_available": Api("TNP101", _A + "is_available", bare=True),
    "device_count": Api("TNP102", _A + "device_count", bare=True),
    "set_device": Api("TNP103", _A + "set_device_index", absent="None"),
    "current_device": Api("TNP104", _A + "current_device_index", bare=True),
    "synchronize": Api("TNP105", _A + "synchronize", absent="None"),
    "empty_cache": Api("TNP106", _A + "empty_cache", absent="None"),
    **{n: Api("TNP107", _A + n, absent="0") for n in _MEM_ZERO},
    "memory_cached": Api("TNP107", _A + "memory_reserved", absent="0"),
    "max_memory_cached": Api("TNP107", _A + "max_memory_reserved", absent="0"),
    "memory_stats": Api("TNP107", _A + "memory_stats", absent="{}"),
    "reset_peak_memory_stats": Api("TNP107", _A + "reset_peak_memory_stats", absent="None"),
    "reset_accumulated_memory_stats": Api("TNP107", _A + "reset_accumulated_memory_stats",
                                          absent="None"),
    "mem_get_info": Api("TNP107", _A + "get_memory_info"),
    **{n: Api("TNP107") for n in (
        "memory_summary", "memory_snapshot", "reset_max_memory_allocated",
        "reset_max_memory_cached", "set_per_process_memory_fraction", "memory_stats_as_nested_dict",
        "list_gpu_processes", "caching_allocator_alloc", "caching_allocator_delete", "memory")},
    "Event": Api("TNP108", "torch.Event", kind="event"),
    "Stream": Api("TNP109", "torch.Stream", kind="stream"),
    "current_stream": Api("TNP109", _A + "current_stream"),
    "set_stream": Api("TNP109", _A + "set_stream"),
    **{n: Api("TNP109") for n in ("stream", "default_stream", "StreamContext", "ExternalStream")},
    "manual_seed": Api("TNP110", "torch.manual_seed", kind="seed"),
    "manual_seed_all": Api("TNP110", "torch.manual_seed", kind="seed"),
    "device": Api("TNP111", _A + "device_index", kind="index"),
    "device_of": Api("TNP111"),
    # Capability queries go to the current accelerator's own module (torch.neuron on neuron).
    "is_bf16_supported": Api("TNP112", _DM + "is_bf16_supported", absent="False"),
    "get_device_capability": Api("TNP112", _DM + "get_device_capability", absent="(0, 0)"),
    "get_device_name": Api("TNP112", _DM + "get_device_name", absent='"cpu"'),
    "get_device_properties": Api("TNP112", _DM + "get_device_properties", guarded_only=True),
    **{n: Api("TNP112") for n in ("is_tf32_supported", "get_arch_list", "get_gencode_flags")},
    **{n: Api("TNP113") for n in (
        "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all", "seed",
        "seed_all", "initial_seed", "default_generators")},
    **{n: Api("TNP114") for n in (
        "CUDAGraph", "graph", "graphs", "make_graphed_callables", "graph_pool_handle")},
    "nvtx": Api("TNP115"),
    "OutOfMemoryError": Api("TNP116", "torch.OutOfMemoryError", bare=True),
    "nccl": Api("TNP501"),
    "amp.autocast": Api("TNP201", "torch.amp.autocast", kind="autocast"),
    "amp.GradScaler": Api("TNP202", "torch.amp.GradScaler", kind="grad_scaler"),
    "amp.custom_fwd": Api("TNP203", "torch.amp.custom_fwd", kind="custom_fwd"),
    "amp.custom_bwd": Api("TNP203", "torch.amp.custom_bwd", kind="custom_fwd"),
}
LEGACY_TYPES = {p + s for p in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short",
                                "Char", "Byte", "Bool") for s in ("Tensor", "Storage")}

# Positional parameters of `torch.cuda.amp.autocast` and `torch.cuda.Event`: the torch.amp /
# torch.Event signatures put something else first, so these become keywords.
AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")
# torch.amp's own entry points, given a device type first: their parameters up to `enabled`
AMP_DEVICE_FUNCS = {
    "torch.autocast": ("device_type", "dtype", "enabled"),
    "torch.amp.autocast": ("device_type", "dtype", "enabled"),
    "torch.amp.autocast_mode.autocast": ("device_type", "dtype", "enabled"),
    "torch.amp.GradScaler": ("device", "init_scale", "growth_factor", "backoff_factor",
                             "growth_interval", "enabled"),
    "torch.amp.grad_scaler.GradScaler": ("device", "init_scale", "growth_factor",
                                         "backoff_factor", "growth_interval", "enabled"),
}
GRAD_SCALER_PARAMS = ("init_scale", "growth_factor", "backoff_factor", "growth_interval",
                      "enabled")
EVENT_PARAMS = ("enable_timing", "blocking", "interprocess")

# torch.backends switches, longest prefix wins.
BACKENDS = {
    "torch.backends.cudnn.benchmark": "TNP301",
    "torch.backends.cudnn.deterministic": "TNP302",
    "torch.backends.cuda.matmul.allow_tf32": "TNP303",
    "torch.backends.cudnn.allow_tf32": "TNP304",
    "torch.backends.cuda.sdp_kernel": "TNP305",
    "torch.backends.cuda.enable_flash_sdp": "TNP305",
    "torch.backends.cuda.enable_mem_efficient_sdp": "TNP305",
    "torch.backends.cuda.enable_math_sdp": "TNP305",
    "torch.backends.cuda.enable_cudnn_sdp": "TNP305",
    "torch.backends.cuda.flash_sdp_enabled": "TNP305",
    "torch.backends.cuda.mem_efficient_sdp_enabled": "TNP305",
    "torch.backends.cuda.math_sdp_enabled": "TNP305",
    "torch.backends.cuda.cudnn_sdp_enabled": "TNP305",
    "torch.backends.cuda": "TNP306",
    "torch.backends.cudnn": "TNP306",
}

# Calls whose first positional argument is a device (or device type).
DEVICE_FIRST_ARG = {
    "torch.device", "torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast",
    "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler", "torch.set_default_device",
    "torch.Generator", "torch.get_device_module", "torch.Event", "torch.Stream",
}
# ... as do the device modules' functions (memory_allocated("cuda:0"), get_device_name(...)).
DEVICE_MODULES = ("torch.cuda.", "torch.accelerator.")
# ... and calls with a device in another position.
DEVICE_ARG_POSITION = {"torch.load": 1, "torch.serialization.load": 1}
# keyword arguments that name a device
DEVICE_KEYWORDS = {"device", "device_type", "map_location"}

COMPILE_MODES = {"max-autotune", "max-autotune-no-cudagraphs", "reduce-overhead"}
COMPILE_FUNCS = {"torch.compile"}

# process-group constructors and the position of `backend` in each
PROCESS_GROUP_FUNCS = {
    "torch.distributed.init_process_group": ("backend", "init_method", "timeout", "world_size",
                                             "rank", "store", "group_name", "pg_options",
                                             "device_id"),
    "torch.distributed.new_group": ("ranks", "timeout", "backend", "pg_options",
                                    "use_local_synchronization", "group_desc", "device_id"),
}
DDP_FUNCS = {"torch.nn.parallel.DistributedDataParallel",
             "torch.nn.parallel.distributed.DistributedDataParallel"}
DDP_DEVICE_ARGS = ("device_ids", "output_device")  # positions 1 and 2
DATA_PARALLEL_FUNCS = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                       "torch.nn.parallel.data_parallel",  # the functional form
                       "torch.nn.parallel.data_parallel.data_parallel",
                       "torch.nn.parallel.data_parallel.DataParallel"}

# Calls whose integer result makes an argument provably a device index.
INT_FUNCS = {"builtins.int", "builtins.len", "torch.distributed.get_rank",
             "torch.distributed.get_world_size", "torch.distributed.get_local_rank",
             "torch.cuda.current_device", "torch.cuda.device_count",
             "torch.accelerator.current_device_index", "torch.accelerator.device_count"}
AVAILABILITY_FUNCS = {"torch.cuda.is_available", "torch.accelerator.is_available"}

ENV_VARS = {"CUDA_VISIBLE_DEVICES": "TNP601"}
NCCL_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_")
CUDA_ENV_PREFIXES = ("CUDA_", "PYTORCH_CUDA_", "PYTORCH_NO_CUDA_", "CUBLAS_", "CUDNN_")

# A file none of whose text contains one of these cannot hold a finding: it is not parsed. (An
# integer device, `.to(local_rank)`, is looked for only where a rank or a GPU is named.)
TRIGGERS = ("cuda", "CUDA", "nccl", "NCCL", "max-autotune", "reduce-overhead", "triton",
            "DataParallel", "data_parallel", "cudnn", "device_ids", "CUBLAS", "rank", "gpu", "GPU")
