"""transformers.Trainer with no setting: default TrainingArguments train on neuron (and equal
the use_cpu=True run), bf16=True trains on neuron under neuron's autocast, torch_compile=True
picks the backend "neuron"; peft LoRA through Trainer lands on neuron too. The neuron runs share
one fresh process, the CPU references (use_cpu=True, the user's explicit choice) another."""

import json

import pytest
import torch

from .fresh import run_script

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("peft")

TRAIN = """
import json, sys, tempfile, torch
from transformers import Trainer, TrainingArguments
from tests.ecosystem.tiny import Tokens, device_report, llama

def run(options):
    model = llama()
    if options.pop("lora", False):
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                                 target_modules=["q_proj", "v_proj"]))
    seen = {}
    def probe(module, inputs, output):
        seen.update(autocast=torch.is_autocast_enabled(output.device.type),
                    dtype=str(output.dtype), device=str(output.device))
    model.get_decoder().layers[0].mlp.down_proj.register_forward_hook(probe)
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=3, learning_rate=1e-2,
                             per_device_train_batch_size=4, report_to=[], save_strategy="no",
                             logging_steps=1, seed=0, disable_tqdm=True, **options)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens())
    trainer.train()
    trained = [p for p in model.parameters() if p.requires_grad]
    return {"device": str(args.device), "backend": args.torch_compile_backend,
            "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
            "weights": torch.cat([p.detach().float().cpu().flatten() for p in trained]).tolist(),
            "trained_devices": sorted({str(p.device) for p in trained}),
            "forward": seen, **device_report(model)}

runs = [run(options) for options in json.loads(sys.argv[1])]
compile_args = TrainingArguments(output_dir=tempfile.mkdtemp(), torch_compile=True, report_to=[])
print(json.dumps({"runs": runs, "compile_backend": compile_args.torch_compile_backend}))
"""

CASES = {"default": {}, "bf16": {"bf16": True}, "lora": {"lora": True}}


def train(tmp_path, *options: dict) -> dict:
    return run_script(tmp_path, TRAIN, json.dumps(list(options)))


@pytest.fixture(scope="module")
def neuron_runs(tmp_path_factory):
    """The three cases one after another in one fresh process: the first Trainer of the process
    meets the device with nothing set, the later ones prove that no state from it is needed."""
    out = train(tmp_path_factory.mktemp("neuron"), *CASES.values())
    return {**dict(zip(CASES, out["runs"])), "compile_backend": out["compile_backend"]}


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    out = train(tmp_path_factory.mktemp("cpu"), *({**o, "use_cpu": True} for o in CASES.values()))
    runs = dict(zip(CASES, out["runs"]))
    for run in runs.values():
        assert run["device"] == "cpu" and run["param_devices"] == ["cpu"]
        assert not run["neuron_initialized"] and run["forward"]["device"] == "cpu"
    return runs


def assert_on_neuron(run: dict):
    assert run["device"] == "neuron:0"
    assert run["param_devices"] == ["neuron:0"] and run["trained_devices"] == ["neuron:0"]
    assert run["forward"]["device"] == "neuron:0"
    assert run["neuron_peak"] > 0


def assert_same_training(neuron: dict, cpu: dict, **tolerance):
    assert len(neuron["losses"]) == 3
    torch.testing.assert_close(torch.tensor(neuron["losses"]), torch.tensor(cpu["losses"]),
                               **tolerance)
    torch.testing.assert_close(torch.tensor(neuron["weights"]), torch.tensor(cpu["weights"]),
                               **tolerance)


def test_default_arguments_train_on_neuron_as_on_the_cpu(neuron_runs, cpu_runs):
    neuron = neuron_runs["default"]
    assert_on_neuron(neuron)
    assert neuron["forward"] == {"autocast": False, "dtype": "torch.float32", "device": "neuron:0"}
    assert_same_training(neuron, cpu_runs["default"])


def test_torch_compile_picks_the_neuron_backend(neuron_runs):
    assert neuron_runs["compile_backend"] == "neuron"  # TrainingArguments(torch_compile=True)


def test_bf16_trains_on_neuron_under_autocast(neuron_runs, cpu_runs):
    neuron = neuron_runs["bf16"]
    assert_on_neuron(neuron)
    assert neuron["forward"] == {"autocast": True, "dtype": "torch.bfloat16", "device": "neuron:0"}
    cpu = cpu_runs["bf16"]
    assert cpu["forward"]["autocast"] and cpu["forward"]["dtype"] == "torch.bfloat16"
    assert_same_training(neuron, cpu, atol=2e-2, rtol=2e-2)


def test_peft_lora_fine_tuning_lands_on_neuron(neuron_runs, cpu_runs):
    neuron = neuron_runs["lora"]
    assert_on_neuron(neuron)
    assert_same_training(neuron, cpu_runs["lora"])


@pytest.mark.slow
def test_torch_compile_trains_on_neuron_as_the_cpu_eager_run(tmp_path, cpu_runs):
    neuron = train(tmp_path, {"torch_compile": True})["runs"][0]
    assert_on_neuron(neuron)
    assert neuron["backend"] == "neuron"
    assert_same_training(neuron, cpu_runs["default"])
