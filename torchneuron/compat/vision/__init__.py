"""The vision batteries: torchvision's model builders, ops and transforms (`compat vision`) and
timm's model families (`compat timm`), neuron against the CPU. They need torchvision (and timm),
which install beside torch 2.14.1 only: `make setup-214`."""
