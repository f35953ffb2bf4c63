"""The `vllm.platform_plugins` entry point (pyproject.toml). vLLM calls `register()` while it
picks its platform; returning the class path activates the neuron platform, returning None
leaves the choice to vLLM. It activates wherever torchneuron has a device, as AWS's plugin does
on a Trainium host. `VLLM_TARGET_DEVICE=cpu` selects vLLM's own CPU platform before plugins are
asked, and `VLLM_PLUGINS` (a list of plugin names) can leave this one out."""

from __future__ import annotations

PLATFORM_CLS = "torchneuron.serving.neuron_platform.NeuronPlatform"


def register() -> str | None:
    import torch

    import torchneuron  # noqa: F401  (torch autoloads it; explicit when autoload is off)

    return PLATFORM_CLS if torch.neuron.is_available() else None
