"""`import torch_neuronx` is torchneuron's API under AWS's import name, registers the device
even with TORCH_DEVICE_BACKEND_AUTOLOAD=0, and is what accelerate and transformers probe; the
probes and `import torch` leave the device uninitialized (lazy, as torch.cuda). AWS's real
package shadowing is tested in tests/kernels/test_import_names.py; here, that torchneuron keeps
working beside it."""

from tests.kernels.test_import_names import fake_distribution

from .fresh import REPO, run_script


def test_import_torch_neuronx_registers_the_device_without_autoload(tmp_path):
    out = run_script(tmp_path, """
        import json, torch
        before = hasattr(torch, "neuron")
        import torch_neuronx, torchneuron
        x = torch.arange(4.0, device="neuron")
        print(json.dumps({
            "before": before, "module": torch_neuronx.__name__,
            "same_api": torch_neuronx.device_count is torch.neuron.device_count,
            "version": torch_neuronx.__version__ == torchneuron.__version__,
            "nki_op": callable(torch_neuronx.nki_op), "sum": (x * 2).sum().item(),
            "device": str(x.device)}))
    """, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert out == {"before": False, "module": "torchneuron.torch_neuronx", "same_api": True,
                   "version": True, "nki_op": True, "sum": 12.0, "device": "neuron:0"}


def test_libraries_find_neuron_by_its_import_name_without_initializing_it(tmp_path):
    out = run_script(tmp_path, """
        import json, torch
        steps = {"import torch": torch.neuron.is_initialized()}
        torch.neuron.is_available(), torch.neuron.device_count()
        steps["is_available, device_count"] = torch.neuron.is_initialized()
        from accelerate.utils import is_neuron_available
        from transformers.utils.import_utils import is_torch_neuron_available
        found = [is_neuron_available(), is_neuron_available(check_device=True),
                 is_torch_neuron_available(), is_torch_neuron_available(check_device=True)]
        steps["accelerate and transformers probes"] = torch.neuron.is_initialized()
        torch.neuron.init()
        steps["torch.neuron.init()"] = torch.neuron.is_initialized()
        print(json.dumps({"found": found, "steps": steps}))
    """)
    assert out["found"] == [True, True, True, True]
    assert out["steps"] == {"import torch": False, "is_available, device_count": False,
                            "accelerate and transformers probes": False,
                            "torch.neuron.init()": True}


def test_first_neuron_tensor_initializes(tmp_path):
    out = run_script(tmp_path, """
        import json, torch
        before = torch.neuron.is_initialized()
        torch.ones(1, device="neuron")
        print(json.dumps({"before": before, "after": torch.neuron.is_initialized()}))
    """)
    assert out == {"before": False, "after": True}


def test_beside_aws_torch_neuronx_torchneuron_steps_aside_and_keeps_working(tmp_path):
    aws = tmp_path / "aws"
    fake_distribution(aws, "torch-neuronx", "2.9.0.2.12.0", "torch_neuronx",
                      "REAL = 'aws torch_neuronx'\n")
    out = run_script(tmp_path, """
        import json, torch, torch_neuronx
        x = torch.ones(2, device="neuron") * 3
        print(json.dumps({"name": getattr(torch_neuronx, "REAL", None),
                          "ours": torch_neuronx.__name__ == "torchneuron.torch_neuronx",
                          "device": str(x.device), "value": x.sum().item()}))
    """, PYTHONPATH=f"{aws}:{REPO}")
    assert out == {"name": "aws torch_neuronx", "ours": False, "device": "neuron:0",
                   "value": 6.0}
