"""torch.neuron.eager_mode(): the mode ops run in now, one value set at configuration
(NEURON_EAGER_MODE) with the run-time settings the launch decision reads applied
(csrc/aten/Launch.h). Each case runs in its own process: the mode is read once per process."""

from __future__ import annotations

import pytest

from torchneuron.runtime import config


@pytest.mark.parametrize("mode", ["sync", "async", "fused"])
def test_eager_mode_is_the_configured_mode(mode, python):
    code = ("import torch, torchneuron\n"
            "x = torch.randn(300, 300, device='neuron')\n"
            "y = (x * 2 + 1).relu()\n"
            "torch.testing.assert_close(y.cpu(), (x.cpu() * 2 + 1).relu())\n"
            "print(torch.neuron.eager_mode(), torchneuron.runtime.execution.mode())\n")
    out = python(code, {"NEURON_EAGER_MODE": mode, "NEURON_LAUNCH_BLOCKING": None}, timeout=300)
    assert out.stdout.split() == [mode, mode], out.stdout + out.stderr


@pytest.mark.parametrize("mode", ["async", "fused"])
def test_launch_blocking_makes_every_mode_sync(mode, python):
    code = ("import torch, torchneuron\n"
            "from torchneuron._C import launch as _launch_c\n"
            "x = torch.randn(768, 768, device='neuron')\n"
            "y = x @ x\n"
            "idle = _launch_c.device_idle()\n"  # the matmul ran at the call
            "torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu())\n"
            "print(torch.neuron.eager_mode(), torchneuron.runtime.execution.mode(), idle)\n")
    out = python(code, {"NEURON_EAGER_MODE": mode, "NEURON_LAUNCH_BLOCKING": "1"}, timeout=300)
    assert out.stdout.split() == ["sync", mode, "True"], out.stdout + out.stderr


def test_deterministic_algorithms_make_fused_mode_async_while_on(python):
    # Under deterministic algorithms fused mode holds nothing (a generated kernel's reduction
    # order is not ATen's): ops are queued as in async mode, and holding resumes once it is off.
    code = ("import torch, torchneuron\n"
            "from torchneuron._C import fused_eager as _fused_eager_c\n"
            "x = torch.randn(256, 1024, device='neuron')\n"
            "def chain():\n"
            "    return ((x * 2).sin() + 1).exp()\n"
            "chain(); torch.neuron.synchronize()\n"  # each op's first call runs at the call
            "before = _fused_eager_c.stats()['ops_held']\n"
            "torch.use_deterministic_algorithms(True)\n"
            "mode_on = torch.neuron.eager_mode()\n"
            "y = chain()\n"
            "torch.neuron.synchronize()\n"
            "held_on = _fused_eager_c.stats()['ops_held'] - before\n"
            "torch.use_deterministic_algorithms(False)\n"
            "mode_off = torch.neuron.eager_mode()\n"
            "z = chain()\n"
            "torch.neuron.synchronize()\n"
            "held_off = _fused_eager_c.stats()['ops_held'] - before - held_on\n"
            "expected = ((x.cpu() * 2).sin() + 1).exp()\n"
            "torch.testing.assert_close(y.cpu(), expected)\n"
            "torch.testing.assert_close(z.cpu(), expected)\n"
            "print(mode_on, held_on, mode_off, held_off > 0)\n")
    out = python(code, {"NEURON_EAGER_MODE": "fused", "NEURON_LAUNCH_BLOCKING": None},
                 timeout=300)
    assert out.stdout.split() == ["async", "0", "fused", "True"], out.stdout + out.stderr


def test_defaults_agree():
    # One default for each setting: the configuration's dataclass, the environment's reading,
    # and (for the eager mode) the README's table.
    loaded = config.load({})
    assert config.Config.__dataclass_fields__["eager_mode"].default == loaded.eager_mode == "async"
    assert config.Config.__dataclass_fields__["fusion_hot"].default == loaded.fusion_hot
    assert config.Config.__dataclass_fields__["launch_blocking"].default is loaded.launch_blocking


def test_eager_mode_is_public():
    import torch

    assert "eager_mode" in torch.neuron.__all__
    assert torch.neuron.eager_mode() in ("sync", "async", "fused")
