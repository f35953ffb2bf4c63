"""Runtime layer, the lowest Python layer: device profiles (the one table of device facts),
configuration from the environment (the one place environment variables are read), lazy device
state, the eager mode's Python side, backward on the calling thread, and the one list of the
PyTorch internals torchneuron relies on.

- `profiles.py`: the device profiles, the one table of facts about each Trainium generation.
- `config.py`: the configuration from the environment, the only reader of environment variables.
- `extension.py`: which build of the C++ core (`torchneuron._C`) this process loads, one per
  torch version side by side.
- `device_state.py`: when the runtime gets its configuration (the first `torch.neuron` call or
  neuron tensor, never `import torch`).
- `execution.py`: the eager mode's Python side (NEURON_EAGER_MODE: async, fused or sync).
- `host_access.py`: host access to device memory under the memory-protected runtime
  (NEURON_MEMORY_PROTECT=1): windows for seam work Python runs, refusals by name.
- `activity.py`: device activities for work Python launches (compiled graphs, collectives),
  handed to the profiler's recorder.
- `autograd_threads.py`: backward on the calling thread instead of a per-device worker.
- `torch_internals.py`: every PyTorch internal torchneuron patches, re-points or relies on, in
  one list (`ENTRIES`), each with a check that fails when a new PyTorch changes it."""
