"""torch.save / torch.load of neuron tensors round-trip bit-exactly, across map_locations."""

import io

import torch


def _checkpoint():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return {"model": model.neuron().state_dict(), "bf16": torch.randn(5).to("neuron", torch.bfloat16),
            "on_1": torch.arange(6, device="neuron:1")}


def test_round_trip_keeps_device_and_bits():
    ckpt = _checkpoint()
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded["on_1"].device == torch.device("neuron", 1)
    for k, v in ckpt["model"].items():
        assert loaded["model"][k].device == v.device
        assert torch.equal(loaded["model"][k].cpu(), v.cpu())
    assert torch.equal(loaded["bf16"].cpu(), ckpt["bf16"].cpu())


def test_map_location_neuron_and_cpu():
    cpu_state = {"w": torch.randn(3, 3), "i": torch.arange(4)}
    buf = io.BytesIO()
    torch.save(cpu_state, buf)
    buf.seek(0)
    on_neuron = torch.load(buf, map_location="neuron")
    assert all(v.is_neuron for v in on_neuron.values())
    assert torch.equal(on_neuron["w"].cpu(), cpu_state["w"])
    buf = io.BytesIO()
    torch.save(_checkpoint(), buf)
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert on_cpu["on_1"].device.type == "cpu"
    buf.seek(0)
    moved = torch.load(buf, map_location={"neuron:1": "neuron:0"})
    assert moved["on_1"].device == torch.device("neuron", 0)


def test_load_in_a_process_that_uses_no_torchneuron_api(python, tmp_path):
    path = tmp_path / "ckpt.pt"
    ckpt = _checkpoint()
    torch.save(ckpt, path)
    expected = {k: v.cpu() for k, v in ckpt["model"].items()}
    torch.save(expected, tmp_path / "expected.pt")
    code = f"""
import torch
got = torch.load({str(path)!r}, map_location="cpu")["model"]
exp = torch.load({str(tmp_path / 'expected.pt')!r})
assert all(torch.equal(got[k], exp[k]) and got[k].device.type == "cpu" for k in exp)
print("ok")
"""
    out = python(code)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    out = python(code, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
