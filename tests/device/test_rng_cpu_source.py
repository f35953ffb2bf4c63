"""NEURON_RNG=cpu: random ops on neuron draw from the CPU's default generator itself, so a seeded
program equals the same program on the CPU bit for bit (torchneuron/device/random.py). The
setting is read once per process, so each case runs in a fresh one."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from torchneuron.runtime import config

# A small seeded training program: weights initialized on the device, a shuffled DataLoader
# (CPU draws), dropout, randn and an LSTM's inter-layer dropout on the device, interleaved step
# by step.
PROGRAM = textwrap.dedent("""
    import json, sys
    import torch, torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    def train(device):
        torch.manual_seed(1234)
        data = TensorDataset(torch.randn(48, 10), torch.randn(48, 1))
        loader = DataLoader(data, batch_size=8, shuffle=True)
        model = nn.Sequential(nn.Linear(10, 32, device=device), nn.ReLU(), nn.Dropout(0.25),
                              nn.Linear(32, 1, device=device))
        rnn = nn.LSTM(10, 10, num_layers=2, dropout=0.3, device=device)  # dropout inside the op
        opt = torch.optim.SGD([*model.parameters(), *rnn.parameters()], lr=0.05, momentum=0.9)
        losses = []
        for _ in range(2):
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                noise = torch.randn(x.shape, device=device)
                mixed = rnn(x.unsqueeze(1))[0].squeeze(1)
                loss = nn.functional.mse_loss(model(x + 0.01 * noise + mixed), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        weights = torch.cat([p.detach().cpu().flatten()
                             for p in [*model.parameters(), *rnn.parameters()]])
        return losses, weights.tolist()

    cpu = train("cpu")
    neuron = train("neuron")
    # the device's own generator is kept and seeded, but nothing drew from it
    torch.manual_seed(5)
    own = torch.neuron.get_rng_state()
    torch.rand(3, device="neuron")
    gen = torch.Generator(device="neuron").manual_seed(9)
    explicit = torch.rand(4, device="neuron", generator=gen).tolist()
    gen.manual_seed(9)
    json.dump({"cpu": cpu, "neuron": neuron,
               "own_state_unchanged": torch.equal(own, torch.neuron.get_rng_state()),
               "explicit_generator_replays":
                   explicit == torch.rand(4, device="neuron", generator=gen).tolist()},
              sys.stdout)
""")


def _run(**env):
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=dict(os.environ, **env),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("mode", ["async", "sync", "fused"])
def test_seeded_training_equals_the_cpu_bit_for_bit(mode):
    """In every eager mode: random ops run at their call (never queued behind or fused with
    other ops), so their draws interleave with the DataLoader's as on the CPU."""
    result = _run(NEURON_RNG="cpu", NEURON_EAGER_MODE=mode)
    torch.testing.assert_close(torch.tensor(result["neuron"][0]), torch.tensor(result["cpu"][0]),
                               rtol=0, atol=0)
    torch.testing.assert_close(torch.tensor(result["neuron"][1]), torch.tensor(result["cpu"][1]),
                               rtol=0, atol=0)
    assert result["own_state_unchanged"]
    assert result["explicit_generator_replays"]


def test_by_default_the_device_draws_from_its_own_generator():
    """Off by default, as on CUDA: the same seed gives the device other numbers than the CPU,
    and the device's own generator moves."""
    result = _run()
    assert result["neuron"][0][0] != result["cpu"][0][0]  # weights drawn elsewhere from step 1
    assert not result["own_state_unchanged"]
    assert result["explicit_generator_replays"]


def test_a_bad_value_is_a_clear_error():
    with pytest.raises(config.ConfigError, match="NEURON_RNG='gpu' is not valid; accepted "
                                                 "values: device, cpu"):
        config.load({"NEURON_RNG": "gpu"})
    assert config.load({}).rng == "device"
    assert config.load({"NEURON_RNG": " CPU "}).rng == "cpu"


def test_the_setting_switches_at_run_time_and_back():
    # What the vision battery does around each model (compat/vision/models.py): after the
    # device's first use, since reading the configuration applies NEURON_RNG itself.
    from torchneuron.device import random as neuron_random

    torch.neuron.init()
    before = neuron_random.draws_from_cpu_generator()
    with neuron_random.drawing_from_cpu_generator():
        assert neuron_random.draws_from_cpu_generator()
        torch.manual_seed(7)
        expected = torch.randperm(50)
        torch.manual_seed(7)
        torch.testing.assert_close(torch.randperm(50, device="neuron").cpu(), expected)
    assert neuron_random.draws_from_cpu_generator() == before
