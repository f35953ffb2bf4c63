"""The diffusers battery (`torchneuron compat diffusers`): model classes built small from
configs (forward and one training step) and pipelines end to end with tiny offline components,
on neuron against the CPU; reports/diffusers.{json,md}.

- `models.py`: diffusers model classes built small from their configs, forward and one step.
- `pipelines.py`: DDPM, Stable Diffusion and DiT pipelines end to end with tiny components.
- `command.py`: `torchneuron compat diffusers`, every case of models.py and pipelines.py."""
