"""`torchneuron port`: finds the code that ties a program to CUDA and rewrites it to
device-agnostic PyTorch (torch.accelerator, torch.amp, torch.distributed defaults).
A pure source tool: nothing here imports torch, so it runs fast and without the device."""
