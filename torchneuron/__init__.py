"""torchneuron: the PyTorch device `neuron` for Trainium-class accelerators.

Importing this package registers everything, top to bottom, in the order below. PyTorch imports
it by itself at `import torch` through the `torch.backends` entry point (see pyproject.toml).

What the package holds, bottom-up by layer (docs/architecture.md has the table):
- `_C`: the C++ core's Python bindings (csrc/python/), one submodule per C++ layer
  (`from torchneuron._C import device as _device_c`).
- `runtime/`: device profiles, the configuration from the environment, lazy device state, the
  eager mode's Python side, and the list of PyTorch internals torchneuron relies on.
- `device/`: `torch.neuron`, the device module shaped like `torch.cuda`.
- `ops/`: the float64 policy, autocast, the op lists and ops that need a rule of their own.
- `profiler/`: the profiler's device activities and their estimated Trainium time.
- `compile/`: `torch.compile` through Inductor (the Dynamo backend `neuron`).
- `distributed/`: the c10d backend `neuron` on gloo, the agreement check, the flight recorder.
- `ecosystem/`: small corrections for libraries that miss the device in one place.
- `timemodel/`: a step's time on another machine, from a FakeTensorMode trace
  (`torchneuron predict`).
- `serving/`: vLLM's platform plugin for neuron.
- `port/`: the CUDA lock-in scanner and rewriter (`torchneuron port`).
- `import_names.py`: which import names (`nki`, `torch_neuronx`) torchneuron answers to.
- `fused_eager/`: fused eager's Python side: the compiler of its hot chains and its cache.
- `kernels/`: NKI on the software NeuronCore, `nki_op` and the kernel library.
- `torch_neuronx.py`: `torch_neuronx`'s names, for code written for AWS's TorchNeuron.
- `compat/`: the compatibility batteries (ops, models, diffusers, PEFT, sentence-transformers).
- `readiness/`: `torchneuron readiness`, a script run unchanged and reported on for Trainium
  (host fallbacks, syncs, recompiles, HBM fit, step time and MFU on trn2/trn3).
- `cli.py`: the `torchneuron` command; each tool package adds its own subcommand."""


try:
    from importlib.metadata import version as _dist_version

    __version__ = _dist_version("torchneuron")
except ImportError:  # PackageNotFoundError: a checkout used without `pip install -e .`
    __version__ = "0.0.0+unknown"


def _autoload() -> None:
    """Entry point PyTorch calls at `import torch`; importing this module did the work."""


# Defined before `import torch`: when a program imports torchneuron first, torch's own import
# calls the entry point on this partially initialized module.
import torch  # noqa: E402

# The C++ core built for this torch version (runtime/extension.py: one build per version).
from .runtime import extension as _extension  # noqa: E402

_extension.load(torch.__version__)
from . import _C  # noqa: E402, F401  (binds torchneuron._C, the module load() registered)
from ._C import aten as _aten_c  # noqa: E402
from ._C import device as _device_c  # noqa: E402
from ._C import launch as _launch_c  # noqa: E402
from .runtime import device_state as _device_state  # noqa: E402

# 1. The runtime: how many devices and how much HBM each, from the profile and the environment,
#    read at the first call into torch.neuron or the first neuron tensor (never here: a bad
#    variable must not break `import torch` for programs that never use neuron).
_device_state.install()
_device_c.register_hooks()  # what ATen asks a device backend outside the dispatcher (csrc/device)
_aten_c.install_kernel_cpu_allocator()  # CPU kernels on neuron memory allocate there (csrc/aten)
from .runtime import execution as _execution  # noqa: E402

# How eager ops execute (NEURON_EAGER_MODE, NEURON_LAUNCH_BLOCKING; the launch decision in
# csrc/aten/Launch.h over the runtime's streams), set with the rest of the configuration; work
# still queued at exit runs to the end first.
_device_state.on_configure(lambda config: _launch_c.configure_execution(
    config.eager_mode, config.launch_blocking))


# Fused mode (csrc/fused_eager/FusedEager.h): held pointwise chains; a thread compiles hot ones. The
# compiler (and so Inductor) is imported only when fused mode is asked for.
def _configure_fusion(config) -> None:
    if config.eager_mode == "fused":
        from .fused_eager import queue_feeder

        queue_feeder.configure(config.eager_mode, config.fusion_hot)


_device_state.on_configure(_configure_fusion)
# NEURON_MEMORY_PROTECT=1 refuses DLPack export of neuron tensors by name (runtime/host_access.py).
from .runtime import host_access as _host_access  # noqa: E402

_host_access.guard_dlpack_export()
import atexit as _atexit  # noqa: E402

_atexit.register(_execution.drain_at_exit)

# 2. The name: PrivateUse1 is called "neuron" everywhere (torch.device, profiler, serialization).
torch.utils.rename_privateuse1_backend("neuron")
# torch.accelerator.Graph's implementation is registered under the device's name, known now.
_device_c.register_graph_impl()

# 3. `torch.neuron`, the device module shaped like `torch.cuda`.
from . import device as _device_module  # noqa: E402

# internal: see runtime/torch_internals.py "torch._register_device_module"
torch._register_device_module("neuron", _device_module)
_device_module._alias_submodules("torch.neuron")  # `import torch.neuron.memory` works
_device_module.ipc.install()  # neuron tensors shared between processes, as CUDA IPC
_device_module.comm.install()  # nn.DataParallel's scatter / gather / broadcast over neuron devices
_device_module.memory.install_oom_advice()  # an OOM message ends with the memory advisor's text
_device_state.on_configure(_device_module.memory.apply_oom_snapshot_setting)  # on OOM
_device_state.on_configure(_device_module.random.apply_rng_setting)  # NEURON_RNG=cpu
# NEURON_ACCOUNTING=1 / NEURON_EXPECT: the readiness accounting on from the first device use.
_device_state.on_configure(_device_module.contract.apply_setting)

# 4. Tensor.neuron() / .is_neuron, Module.neuron(), Storage.neuron() / .is_neuron.
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_storage=True, for_packed_sequence=True
)

# 5. Op policies: what float64 does on a device without float64 arithmetic, and autocast's
#    default dtype (its op lists are registered by the C++ core, csrc/ops/Autocast.cpp).
from .ops import autocast as _autocast  # noqa: E402
from .ops import dtype_policy as _dtype_policy  # noqa: E402
from .ops import linear_cross_entropy as _linear_cross_entropy  # noqa: E402
from .ops import op_support as _op_support  # noqa: E402

# The accounting counts the op-support table's host fallbacks (docs/op-support.md).
_device_module.accounting.set_host_fallback_source(_op_support.host_fallback_ops)

_dtype_policy.apply("warn")  # the default; the configuration's policy when it is read:
_device_state.on_configure(lambda config: _dtype_policy.apply(config.float64_policy))
_autocast.apply()
_linear_cross_entropy.apply()  # chunked F.linear_cross_entropy accumulates as on the CPU
from .ops import recurrent as _recurrent  # noqa: E402

_recurrent.apply()  # nn.LSTM / GRU / RNN: the CPU's whole op, not a cell per time step

# 5b. Ops the dispatcher would decompose on neuron although the CPU has a fused kernel for them
#     (LayerNorm, GroupNorm): they run the CPU kernel like every other op, bit for bit.
ROUTED_TO_CPU_KERNELS = tuple(_aten_c.route_to_cpu_kernels())

# 6. torch.compile: the Dynamo backend `neuron` (a `torch_dynamo_backends` entry point) and
#    Inductor's C++ kernel generation for neuron tensors, registered when a compile first asks.
from . import compile as _compile  # noqa: E402

_compile.install_inductor_hooks(_device_module)
_compile.install_fake_tensor_rules()  # traced neuron convolutions answer in the CPU's layout

# 7. torch.distributed: the c10d backend `neuron` (gloo on zero-copy CPU aliases), also the
#    default backend for the device, so init_process_group() picks it.
from . import distributed as _distributed  # noqa: E402

_distributed.register()

# 8. Autograd: backward runs on the calling thread (the device's streams queue; see the module).
from .runtime.autograd_threads import run_backward_on_calling_thread  # noqa: E402

run_backward_on_calling_thread()

# 9. Libraries that know the device `neuron` but miss it in one place (transformers' pipeline
#    device index) get the smallest correction when they are imported (torchneuron/ecosystem/).
from . import ecosystem as _ecosystem  # noqa: E402

_ecosystem.install()
# AOTInductor packages of programs exported on neuron (torchneuron/compile/aoti.py), patched into
# PyTorch when it imports the two modules involved, never by importing them here.
_compile.install_aoti_hooks(_ecosystem.when_imported)
