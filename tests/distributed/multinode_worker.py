"""Run by test_dist_multinode under torchrun (one launcher per "node"): DDP and FSDP2 training of
test_dist_parallel's MLP on each rank's shard of the batches, and a distributed checkpoint saved
(phase "train", any number of ranks) or loaded (phase "load"). Each rank writes what it found to
<out>/<phase>_<rank>.pt for the test to compare with one process. argv: phase, out folder."""

import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP
from test_dist_parallel import batches, device, make_mlp, shard

phase, out = sys.argv[1], sys.argv[2]
torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("neuron")
rank = dist.get_rank()


def train(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in batches():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(shard(x, rank).to(device())),
                                            shard(y, rank).to(device()))
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / dist.get_world_size())
    return losses


found = {"world": dist.get_world_size(), "host_rank": (os.environ["GROUP_RANK"],
                                                       os.environ["LOCAL_RANK"])}
if phase == "train":
    ddp = DDP(make_mlp().to(device()))
    found["ddp_losses"] = train(ddp)
    found["ddp_state"] = {k: v.cpu() for k, v in ddp.module.state_dict().items()}
    fsdp = make_mlp().to(device())
    fully_shard(fsdp)
    found["fsdp_losses"] = train(fsdp)
    found["fsdp_state"] = {k: v.full_tensor().cpu() for k, v in fsdp.state_dict().items()}
    dcp.save({"model": fsdp.state_dict()}, checkpoint_id=os.path.join(out, "ckpt"))
else:
    torch.manual_seed(123)  # other weights until the load
    model = torch.nn.Sequential(*make_mlp()).to(device())
    for p in model.parameters():
        torch.nn.init.zeros_(p)
    fully_shard(model)
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=os.path.join(out, "ckpt"))
    model.load_state_dict(state["model"])
    found["loaded"] = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
torch.save(found, os.path.join(out, f"{phase}_{rank}.pt"))
dist.destroy_process_group()
