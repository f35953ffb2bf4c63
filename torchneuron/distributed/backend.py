"""The c10d backend `neuron`: a gloo backend that also serves neuron tensors (see collectives.py
for how). Registered for both devices so that `init_process_group("neuron")` also handles CPU
tensors (object collectives, CPU-side bookkeeping), and as the default backend for `neuron`, so
that `init_process_group()` with no backend picks it on a neuron machine."""

from __future__ import annotations

import torch.distributed as dist
from torch.distributed import ProcessGroupGloo

from . import agreement, agreement_channel, barriers, collectives, flight_recorder, watchdog

BACKEND_NAME = "neuron"


def _create_backend(opts, backend_options) -> ProcessGroupGloo:
    if backend_options is not None:
        # gloo's own branch drops pg_options without a word; we say so instead.
        raise ValueError("the neuron backend takes no pg_options (it runs gloo with its "
                         f"defaults), got {type(backend_options).__name__}")
    backend = ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, timeout=opts.timeout)
    backend.options.global_ranks_in_group = opts.global_ranks_in_group
    backend.options.group_name = opts.group_id
    agreement_channel.group_created(opts.group_id, opts.store, opts.timeout.total_seconds())
    watchdog.start(opts.store)  # flight-recorder dumps on SIGUSR2 and on other ranks' reports
    return backend


def register() -> None:
    """Registers the backend and its kernels; safe to call more than once."""
    collectives.register_kernels()
    flight_recorder.install()
    barriers.install()
    # internal: see runtime/torch_internals.py "Backend._plugins"
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True,
                                  devices=["cpu", BACKEND_NAME])
