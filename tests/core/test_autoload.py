"""The device exists after `import torch` alone (the torch.backends entry point)."""

import torch


def test_plain_import_torch_makes_neuron_usable(python):
    code = (
        "import sys, torch\n"
        "t = torch.ones(2, device='neuron')\n"
        "assert (t + t).cpu().tolist() == [2.0, 2.0]\n"
        "assert 'torchneuron' in sys.modules\n"
        "print(torch.accelerator.current_accelerator(), torch.accelerator.is_available())\n"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "neuron True"


def test_generated_methods_and_device_module():
    t = torch.arange(4.0)
    assert torch.neuron is __import__("torchneuron").device
    assert t.neuron().is_neuron and not t.is_neuron
    assert t.neuron().device == torch.device("neuron", 0)
    m = torch.nn.Linear(2, 2).neuron()
    assert m.weight.is_neuron
    s = torch.UntypedStorage(16).neuron()
    assert s.is_neuron and s.device.type == "neuron"
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == torch.neuron.device_count() >= 2
    torch.testing.assert_close(t.neuron().cpu(), t)


def test_autoload_can_be_disabled(python):
    out = python("import torch\ntorch.ones(1, device='neuron')",
                 env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out.returncode != 0
    assert "neuron" in out.stderr
