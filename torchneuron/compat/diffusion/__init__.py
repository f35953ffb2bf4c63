"""The diffusers battery (`torchneuron compat diffusers`): model classes built small from
configs (forward and one training step) and pipelines end to end with tiny offline components,
on neuron against the CPU; reports/diffusers.{json,md}. Pieces: models, pipelines, command."""
