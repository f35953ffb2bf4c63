"""Run by test_dist_init under torchrun: env:// rendezvous, one neuron device per LOCAL_RANK.
argv[1] is the backend to name, or "none" for init_process_group() with no backend."""

import os
import sys

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.neuron.set_device(local_rank)
if sys.argv[1] == "none":
    dist.init_process_group()
else:
    dist.init_process_group(sys.argv[1])
rank, world = dist.get_rank(), dist.get_world_size()
on_neuron = torch.arange(6.0, device="neuron") * (rank + 1)
on_cpu = torch.arange(6.0) * (rank + 1)
dist.all_reduce(on_neuron)
dist.all_reduce(on_cpu)
torch.testing.assert_close(on_neuron.cpu(), on_cpu)
torch.testing.assert_close(on_cpu, torch.arange(6.0) * sum(range(1, world + 1)))
dist.barrier()
print(f"rank {rank}/{world} ok on {on_neuron.device} backend={dist.get_backend()}", flush=True)
dist.destroy_process_group()
