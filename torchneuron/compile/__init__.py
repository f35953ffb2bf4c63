"""Compile layer: `torch.compile` on neuron. The Dynamo backend `neuron` (backend.py, found by
Dynamo through the `torch_dynamo_backends` entry point) and Inductor's code generation for the
neuron device (inductor.py), so a bare `torch.compile(model)` on neuron tensors works too.

- `backend.py`: the Dynamo backend `neuron`, Inductor with neuron's kernel generation, and what
  the compile modes mean on neuron.
- `reduce_overhead.py`: `mode="reduce-overhead"` (and Inductor's `triton.cudagraphs`): each
  compiled graph captured into device graphs per input-shape key and replayed.
- `inductor.py`: Inductor's CPU C++ kernel generator pointed at neuron memory, with a host-side
  wrapper of neuron's own.
- `inductor_cpu_paths.py`: where Inductor tests `device.type == "cpu"` to mean "C++ backend",
  neuron takes the same path.
- `device_interface.py`: the Dynamo/Inductor device interface, forwarding to `torch.neuron`.
- `onednn_gemm.py`: matmuls in compiled neuron graphs run on oneDNN's GEMM.
- `gemm_by_size.py`: the size rule between oneDNN and ATen, and `torchneuron::linear_by_size`,
  which applies it at the call where a graph's row count is dynamic.
- `aoti.py`: AOTInductor packages (`aoti_compile_and_package`, `aoti_load_package`) of programs
  exported on neuron: compiled by the CPU C++ wrapper, run on neuron tensors as one stream item.
- `conv_layout.py`: the memory format a traced neuron convolution is predicted to answer in (the
  CPU's).

Importing Dynamo/Inductor costs about 1.5 s, so nothing here imports them until a compilation
asks: Inductor looks up `torch.neuron.Scheduling` and friends the first time it generates code
for the PrivateUse1 device, and `install_inductor_hooks` registers neuron at that moment."""

from __future__ import annotations

from types import ModuleType

# Defines torchneuron::linear_by_size now: graph code cached by another process calls it before
# this one generates any code (gemm_by_size.py).
from . import gemm_by_size  # noqa: F401

# The names Inductor reads from the PrivateUse1 device module (see Inductor's
# `init_backend_registration`) to register the device itself, if nobody has yet.
_INDUCTOR_HOOKS = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def install_inductor_hooks(device_module: ModuleType) -> None:
    """Register neuron with Inductor and Dynamo the first time Inductor looks up one of its
    PrivateUse1 names on `device_module` (torch.neuron).

    The lookup registers neuron in full (inductor.register) and then answers "absent", so that
    Inductor keeps that registration instead of registering the four classes again on its own:
    its generic registration would drop neuron's cache fingerprint (inductor.CodegenFingerprint),
    and graphs cached by another torchneuron version would be reused."""
    previous = getattr(device_module, "__getattr__", None)

    def __getattr__(name: str):
        if name in _INDUCTOR_HOOKS:
            from . import inductor

            inductor.register()
            raise AttributeError(f"neuron registered itself with Inductor (torchneuron.compile."
                                 f"inductor.register); {name} is not looked up here")
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module {device_module.__name__!r} has no attribute {name!r}")

    # internal: see runtime/torch_internals.py "init_backend_registration"
    device_module.__getattr__ = __getattr__


def install_fake_tensor_rules() -> None:
    """Tracing (torch.compile, torch.export, FakeTensorMode) predicts the layout of a neuron
    convolution as the CPU's, which is the one neuron's kernel answers in (see conv_layout.py).
    PyTorch imports its fake-tensor rules at `import torch`, so this costs no import."""
    from . import conv_layout

    conv_layout.install()


def install_aoti_hooks(when_imported) -> None:
    """AOTInductor on neuron (aoti.py), applied by `when_imported(module, hook)` (the ecosystem
    layer's post-import hook, passed down by torchneuron/__init__.py) once PyTorch imports the
    module it patches: importing Inductor here would cost every process about 1.5 s."""

    def compile_hook(module) -> None:
        from . import aoti

        aoti.install_compile(module)

    def load_hook(module) -> None:
        from . import aoti

        aoti.install_load(module)

    when_imported("torch._inductor", compile_hook)
    when_imported("torch.export.pt2_archive._package", load_hook)
