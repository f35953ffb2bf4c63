"""The vision batteries: torchvision's model builders, ops and transforms (`compat vision`) and
timm's model families (`compat timm`), neuron against the CPU. They need torchvision (and timm),
which install beside torch 2.14.1 only: `make setup-214`.

- `command.py`: `torchneuron compat vision`, its report and throughput (builders per minute).
- `models.py`: every torchvision model builder as staged cases, forward and a training backward.
- `ops.py`: every public op of torchvision.ops, forward, backward and bad input.
- `moving.py`: a case's nested inputs moved to a device, for the models and the ops.
- `transforms.py`: transforms v2 on neuron tensors, and inside a DataLoader with workers.
- `timm_command.py`: `torchneuron compat timm`, timm's families against the CPU.
- `timm_models.py`: one smallest configuration per timm model family, as staged cases."""
