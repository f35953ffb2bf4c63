"""Hugging Face's own training paths on neuron with accelerate's explicit device setting,
ACCELERATE_TORCH_DEVICE=neuron (still honoured; with no setting at all they find neuron through
`torch_neuronx`, tests/ecosystem/, which also covers Trainer): an accelerate Accelerator()
loop. Each run is a fresh process (accelerate's state is a per-process singleton) and is compared
with the same run on the CPU: same losses, same weights."""

import json

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("transformers")

ACCELERATE = r'''
import json, torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

accelerator = Accelerator()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(32, 8), torch.randn(32, 1))
model, opt, loader = accelerator.prepare(model, opt, DataLoader(data, batch_size=8))
losses, batch_device = [], None
for x, y in loader:
    batch_device = str(x.device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
print(json.dumps({"device": str(accelerator.device), "param": str(next(model.parameters()).device),
                  "batch": batch_device, "losses": losses,
                  "weight": model[0].weight.detach().cpu().flatten().tolist()}))
'''


def _run(python, code: str, tmp_path, device: str | None) -> dict:
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    if device is not None:
        env["ACCELERATE_TORCH_DEVICE"] = device
    proc = python(code.replace("{out}", str(tmp_path)), env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _assert_same_training(neuron: dict, cpu: dict):
    import torch

    torch.testing.assert_close(torch.tensor(neuron["losses"]), torch.tensor(cpu["losses"]))
    torch.testing.assert_close(torch.tensor(neuron["weight"]), torch.tensor(cpu["weight"]))


def test_accelerator_trains_on_neuron_with_the_device_setting(python, tmp_path):
    neuron = _run(python, ACCELERATE, tmp_path, "neuron")
    assert neuron["device"].startswith("neuron")
    assert neuron["param"].startswith("neuron") and neuron["batch"].startswith("neuron")
    cpu = _run(python, ACCELERATE, tmp_path, "cpu")
    _assert_same_training(neuron, cpu)
