"""Data-parallel training, launched with `torchrun --nproc_per_node=N ddp_train.py`."""
import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 32)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def main():
    accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", default="ddp_results.json")
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.accelerator.is_available(): torch.accelerator.set_device_index(local_rank)
    dist.init_process_group(backend=dist.get_default_backend_for_device(accelerator))
    rank, world_size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = ToyModel().to(torch.device(accelerator.type, local_rank))
    ddp_model = DDP(model, device_ids=[local_rank] if torch.accelerator.is_available() else None, output_device=local_rank if torch.accelerator.is_available() else None)
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05)

    dataset = TensorDataset(torch.randn(64, 10), torch.randn(64, 5))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler, pin_memory=True)

    losses = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x = x.to(f"{accelerator.type}:{local_rank}", non_blocking=True)
            y = y.to(f"{accelerator.type}:{local_rank}", non_blocking=True)
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            optimizer.step()
            avg = loss.detach().clone()
            dist.all_reduce(avg, op=dist.ReduceOp.SUM)
            losses.append(avg.item() / world_size)

    checksum = sum(p.detach().sum() for p in ddp_model.parameters())
    dist.barrier()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"losses": losses, "checksum": checksum.item(), "world_size": world_size}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
