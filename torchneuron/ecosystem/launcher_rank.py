"""One NeuronCore per process under a launcher: a process that torchrun or `accelerate launch`
started (LOCAL_RANK set) starts on neuron:LOCAL_RANK, as AWS's TorchNeuron binds each worker to
its own core. accelerate relies on it: for neuron it takes the process's device from
`torch.neuron.current_device()` and gives DDP `device_ids=[local_process_index]`; with every
process on neuron:0 the two disagreed and rank 1 mixed neuron:0 and neuron:1. `set_device()`
still chooses any device; processes with no launcher start on neuron:0 as before."""

from __future__ import annotations

import os

from .._C import device as _device_c


def launcher_local_rank() -> int | None:
    """torchrun's LOCAL_RANK (a launcher's variable, not a torchneuron setting), or None."""
    text = os.environ.get("LOCAL_RANK", "").strip()
    return int(text) if text.isdigit() else None


def start_on_local_rank(config) -> None:
    """Runs once the runtime is configured (runtime/device_state.on_configured)."""
    rank = launcher_local_rank()
    if rank is not None and config.device_count > 0:
        _device_c.set_device(rank % config.device_count)
