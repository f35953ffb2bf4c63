"""transformers' pipeline() and from_pretrained(device_map="auto") with no setting: an integer
device, device="neuron", no device at all and device_map="auto" run on neuron and generate the
CPU's tokens; device_map="auto" sizes the placement with torch.neuron.mem_get_info through
accelerate, spreads a model over the neuron devices when one does not hold it and spills to the
CPU when they all do not (a small NEURON_HBM_BYTES), as on CUDA."""

import pytest
import torch

from .fresh import run_script

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

PIPELINES = """
import json, sys, tempfile, torch
from transformers import AutoModelForCausalLM, pipeline
from tests.ecosystem.tiny import llama_folder

folder = llama_folder(tempfile.mkdtemp(), *json.loads(sys.argv[2]))
prompt = "The quick brown fox"
def generate(**where):
    before = torch.neuron.memory_allocated() if torch.neuron.is_initialized() else 0
    pipe = pipeline("text-generation", model=folder, **where)
    resident = torch.neuron.memory_allocated() - before if torch.neuron.is_initialized() else 0
    text = pipe(prompt, max_new_tokens=6, do_sample=False)[0]["generated_text"]
    out = {"device": str(pipe.device), "text": text, "resident": resident,
           "params": sorted({str(p.device) for p in pipe.model.parameters()})}
    del pipe
    return out

results = {}
if sys.argv[1] == "pipelines":
    results["cpu"] = generate(device="cpu")
    assert not torch.neuron.is_initialized()  # the CPU pipeline never touched the device
    for name, where in [("index 0", {"device": 0}), ("neuron", {"device": "neuron"}),
                        ("no device", {}), ("device_map auto", {"device_map": "auto"})]:
        results[name] = generate(**where)

ids = torch.tensor([[1, 5, 9, 17, 33, 65]])
cpu_model = AutoModelForCausalLM.from_pretrained(folder)
auto = AutoModelForCausalLM.from_pretrained(folder, device_map="auto")
results["from_pretrained"] = {"map": {k: str(v) for k, v in auto.hf_device_map.items()},
                              "free_total": list(torch.neuron.mem_get_info(0))}
# Inference as generate() runs it, without autograd: a graph would keep each layer accelerate
# onloads from the CPU alive until backward, on CUDA as here.
with torch.no_grad():
    logits = auto(ids.to(auto.device)).logits
    results["from_pretrained"].update(logits_device=str(logits.device),
                                      logits=logits.float().cpu().tolist(),
                                      cpu_logits=cpu_model(ids).logits.tolist())
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    return run_script(tmp_path_factory.mktemp("pipelines"), PIPELINES, "pipelines", "[32, 2]")


@pytest.mark.parametrize("case", ["index 0", "neuron", "no device", "device_map auto"])
def test_pipeline_runs_on_neuron_and_generates_the_cpu_tokens(default_run, case):
    cpu, got = default_run["cpu"], default_run[case]
    assert cpu["device"] == "cpu" and cpu["params"] == ["cpu"] and cpu["resident"] == 0
    assert got["device"].startswith("neuron"), got
    assert all(p.startswith("neuron:") for p in got["params"]), got
    assert got["resident"] > 0  # the weights are in device memory
    assert got["text"] == cpu["text"] and len(got["text"]) > len("The quick brown fox")


def _assert_logits_equal_the_cpu(placement: dict):
    assert placement["logits_device"].startswith("neuron")
    torch.testing.assert_close(torch.tensor(placement["logits"]),
                               torch.tensor(placement["cpu_logits"]))


def test_device_map_auto_places_every_weight_on_neuron(default_run):
    placement = default_run["from_pretrained"]
    assert placement["map"] and all(v.isdigit() for v in placement["map"].values()), placement["map"]
    _assert_logits_equal_the_cpu(placement)


def _place(tmp_path, hbm_mib: int, mode: str = "placement"):
    """from_pretrained(device_map="auto") of a ~2.8 MiB model with `hbm_mib` MiB per device."""
    out = run_script(tmp_path, PIPELINES, mode, "[128, 4]", NEURON_HBM_BYTES=f"{hbm_mib}MiB")
    placement = out["from_pretrained"]
    assert placement["free_total"][1] == hbm_mib << 20  # what accelerate sizes the map with
    return placement


def test_device_map_auto_spreads_over_neuron_devices_when_one_does_not_hold_the_model(tmp_path):
    placement = _place(tmp_path, 2)  # one 2 MiB device cannot hold 2.8 MiB, four can
    devices = set(placement["map"].values())
    assert "cpu" not in devices and "disk" not in devices and len(devices) >= 2, placement["map"]
    _assert_logits_equal_the_cpu(placement)


def test_device_map_auto_spills_to_the_cpu_when_the_devices_do_not_hold_the_model(tmp_path):
    # Four 1 MiB devices hold part of it; the forward onloads the CPU part onto neuron:0 layer
    # by layer (accelerate keeps room there for the largest layer) and gives the CPU's logits.
    placement = _place(tmp_path, 1, mode="spill")
    devices = set(placement["map"].values())
    assert "cpu" in devices and devices & {"0", "1", "2", "3"}, placement["map"]
    _assert_logits_equal_the_cpu(placement)
