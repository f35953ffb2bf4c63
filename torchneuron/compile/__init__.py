"""Compile layer: `torch.compile` on neuron. The Dynamo backend `neuron` (backend.py, found by
Dynamo through the `torch_dynamo_backends` entry point) and Inductor's code generation for the
neuron device (inductor.py), so a bare `torch.compile(model)` on neuron tensors works too.

Importing Dynamo/Inductor costs about 1.5 s, so nothing here imports them until a compilation
asks: Inductor looks up `torch.neuron.Scheduling` and friends the first time it generates code
for the PrivateUse1 device, and `install_inductor_hooks` answers that lookup."""

from __future__ import annotations

from types import ModuleType

# The names Inductor reads from the PrivateUse1 device module (see Inductor's
# `init_backend_registration`) and the classes in inductor.py that answer them.
_INDUCTOR_HOOKS = {
    "Scheduling": "CppScheduling",
    "PythonWrapperCodegen": "NeuronWrapperCodegen",
    "CppWrapperCodegen": "NeuronCppWrapperCodegen",
    "WrapperFxCodegen": "WrapperFxCodegen",
}


def install_inductor_hooks(device_module: ModuleType) -> None:
    """Give `device_module` (torch.neuron) the attributes Inductor looks up for PrivateUse1,
    registering neuron with Inductor and Dynamo on first access."""
    previous = getattr(device_module, "__getattr__", None)

    def __getattr__(name: str):
        if name in _INDUCTOR_HOOKS:
            from . import inductor

            inductor.register()
            return getattr(inductor, _INDUCTOR_HOOKS[name])
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module {device_module.__name__!r} has no attribute {name!r}")

    device_module.__getattr__ = __getattr__
