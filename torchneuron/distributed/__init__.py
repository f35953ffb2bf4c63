"""torch.distributed on neuron: the c10d backend `neuron`, built on gloo, zero-copy on neuron
memory. `register()` runs once at import of torchneuron (step 7 of torchneuron/__init__.py).

- `backend.py`: the c10d backend `neuron`, a gloo backend that also serves neuron tensors.
- `collectives.py`: how c10d collectives run on neuron tensors (checked, then on CPU aliases of
  the same memory, no copy).
- `direct_calls.py`: the hot collectives (DDP, FSDP2, TP) called on gloo directly.
- `barriers.py`: dist.barrier and dist.monitored_barrier on neuron groups.
- `checked_collectives.py`: which collectives the agreement check covers and which arguments
  must agree; read by both agreement.py and flight_recorder.py.
- `agreement.py`: the check that all ranks call the same collective on the same shapes and
  dtypes before gloo moves any data.
- `agreement_channel.py`: direct sockets between ranks that carry the check's fingerprints.
- `sequencer.py`: starts a backward pass's checked asynchronous collectives on one thread per
  group, in call order.
- `flight_recorder.py`: PyTorch's flight recorder completed with what only the backend knows,
  dumped where PyTorch dumps it.
- `forensics.py`: errors that name the rank that broke a collective and where the dumps are.
- `watchdog.py`: one thread per process that writes flight-recorder dumps when the main thread
  cannot (SIGUSR2, another rank's failure)."""

from .backend import BACKEND_NAME, register

__all__ = ["BACKEND_NAME", "register"]
