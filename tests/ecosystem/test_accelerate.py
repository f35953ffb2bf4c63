"""accelerate with no setting: Accelerator() picks neuron:0 and a prepare() + training loop
equals the same loop on the CPU; `accelerate launch --num_processes 2` and torchrun run DDP
with one NeuronCore per process over the c10d backend `neuron` (each launched process starts
on neuron:LOCAL_RANK, torchneuron/ecosystem/launcher_rank.py), and accelerate's neuron variants of gather_object and
broadcast_object_list hand back the right objects."""

import pytest
import torch

from .fresh import launcher, run_script

pytest.importorskip("accelerate")

# Trains on the global batch of 8 per process; the reference is the same loop on the CPU over
# the same global batches (DDP averages the ranks' gradients: one batch of 8 * world samples).
LOOP = """
import json, os, torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list, gather_object
from torch.utils.data import DataLoader, TensorDataset
from tests.ecosystem.tiny import device_report

def model_and_data():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    return model, data

def train(model, loader, step):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    devices = set()
    for x, y in loader:
        devices.add(str(x.device))
        loss = torch.nn.functional.mse_loss(model(x), y)
        step(loss)
        opt.step()
        opt.zero_grad()
    return devices

accelerator = Accelerator()
model, data = model_and_data()
raw = model
model, loader = accelerator.prepare(model, DataLoader(data, batch_size=8))
batch_devices = train(model, loader, accelerator.backward)
report = device_report(raw)
rank, world = accelerator.process_index, accelerator.num_processes
out = {"rank": rank, "world": world, "device": str(accelerator.device),
       "distributed_type": str(accelerator.distributed_type),
       "backend": dist.get_backend() if dist.is_initialized() else None,
       "visible_cores": os.environ.get("NEURON_RT_VISIBLE_CORES"),
       "core": torch.neuron.get_device_properties(accelerator.device).name,
       "batch_devices": sorted(batch_devices),
       "weights": torch.cat([p.detach().cpu().flatten() for p in raw.parameters()]).tolist(),
       "gathered": gather_object([{"rank": rank, "word": "abc" * (rank + 1)}]),
       "broadcast": broadcast_object_list([f"from {rank}", {"n": rank}] if rank == 0
                                          else [None, None]),
       **report}
cpu_model, cpu_data = model_and_data()
train(cpu_model, DataLoader(cpu_data, batch_size=8 * world), lambda loss: loss.backward())
out["cpu_weights"] = torch.cat([p.detach().flatten() for p in cpu_model.parameters()]).tolist()
everyone = gather_object([out])
if accelerator.is_main_process:
    print(json.dumps({"ranks": everyone}))
"""


def assert_trained_on_neuron_as_on_the_cpu(rank: dict):
    assert rank["device"].startswith("neuron"), rank
    indexed = rank["device"] if ":" in rank["device"] else rank["device"] + ":0"
    assert rank["param_devices"] == rank["batch_devices"] == [indexed], rank
    assert rank["neuron_peak"] > 0
    torch.testing.assert_close(torch.tensor(rank["weights"]), torch.tensor(rank["cpu_weights"]))


def test_accelerator_picks_neuron_and_trains_as_on_the_cpu(tmp_path):
    (rank,) = run_script(tmp_path, LOOP)["ranks"]
    # accelerate names the device without an index in one process, as it does for CUDA.
    assert rank["device"] == "neuron" and rank["world"] == 1
    assert_trained_on_neuron_as_on_the_cpu(rank)
    assert rank["gathered"] == [{"rank": 0, "word": "abc"}]
    assert rank["broadcast"] == ["from 0", {"n": 0}]


def _assert_ddp_over_two_cores(ranks: list[dict]):
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["world"] == 2 for r in ranks)
    for rank in ranks:
        assert rank["distributed_type"] == "DistributedType.MULTI_NEURON", rank
        assert "neuron" in rank["backend"], rank["backend"]
        assert_trained_on_neuron_as_on_the_cpu(rank)
        assert rank["gathered"] == [{"rank": 0, "word": "abc"}, {"rank": 1, "word": "abcabc"}]
        assert rank["broadcast"] == ["from 0", {"n": 0}]
    # One NeuronCore per process: accelerate 1.16 sets no NEURON_RT_VISIBLE_CORES per process
    # (only --gpu_ids, the same for all); each launched process starts on neuron:LOCAL_RANK.
    assert [r["visible_cores"] for r in ranks] == [None, None]
    assert [r["device"] for r in ranks] == ["neuron:0", "neuron:1"]
    assert ranks[0]["core"] != ranks[1]["core"]
    torch.testing.assert_close(torch.tensor(ranks[0]["weights"]), torch.tensor(ranks[1]["weights"]))


def test_accelerate_launch_two_processes_run_ddp_on_two_cores(tmp_path):
    out = run_script(tmp_path, LOOP, launcher=launcher(
        "accelerate.commands.launch", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0"),
        timeout=400)
    _assert_ddp_over_two_cores(out["ranks"])


@pytest.mark.slow
def test_torchrun_two_processes_run_ddp_on_two_cores(tmp_path):
    out = run_script(tmp_path, LOOP, launcher=launcher(
        "torch.distributed.run", "--standalone", "--nproc_per_node", "2"), timeout=300)
    _assert_ddp_over_two_cores(out["ranks"])
