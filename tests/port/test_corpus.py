"""The corpus: small real-looking CUDA programs (training loops, a DDP script, a Hugging Face
fine-tuning loop, a notebook). For each, what `port check` finds (<name>.findings), what
`port fix` writes (<name>.fixed.*), and that the rewritten program gives the same results on
neuron as on the CPU. Set PORT_UPDATE_CORPUS=1 to rewrite the expectations (then read the diff)."""

import json
import os
import shutil

import pytest
import torch

from torchneuron.port import engine

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
# regress_*: real idioms in the shapes a fix once made worse (issue 46); each original runs on
# the CPU as well, and its fixed program must equal it there exactly
REGRESS = ["regress_guards.py", "regress_amp.py", "regress_seed.py", "regress_backend.py"]
PROGRAMS = ["mnist_cnn.py", "amp_benchmark.py", "ddp_train.py", "hf_finetune.py",
            "linear_regression.ipynb", "gpt_train.py", *REGRESS]
# bf16 autocast runs different kernels on the two devices (and gpt_train trains in bf16 on neuron
# but in float32 without an accelerator, as it would on CUDA and on a CPU); the rest is float32
TOLERANCE = {"amp_benchmark.py": dict(rtol=2e-2, atol=2e-3),
             "gpt_train.py": dict(rtol=2e-2, atol=2e-2),
             "regress_amp.py": dict(rtol=5e-2, atol=1e-2)}  # float16 on neuron, float32 on the CPU
# the regression corpus runs on neuron with NEURON_RNG=cpu: float32 programs on one device equal
# the CPU exactly (regress_guards runs DataParallel over all neuron devices: float32 tolerances)
EXACT = {"regress_seed.py", "regress_backend.py"}
UPDATE = os.environ.get("PORT_UPDATE_CORPUS") == "1"


def fixed_name(name):
    stem, ext = os.path.splitext(name)
    return f"{stem}.fixed{ext}"


def listing(findings):
    out = []
    for f in findings:
        cell = f"cell {f.cell}:" if f.cell is not None else ""
        out.append(f"{cell}{f.line}:{f.col} {f.code} {'fix' if f.fixable else 'hint'}\n")
    return "".join(out)


def expect(path, actual):
    if UPDATE:
        with open(path, "w") as f:
            f.write(actual)
    with open(path) as f:
        assert actual == f.read(), f"differs from {os.path.relpath(path, HERE)}"


@pytest.mark.parametrize("name", PROGRAMS)
def test_findings(name):
    result = engine.process(os.path.join(CORPUS, name))
    assert not result.errors
    expect(os.path.join(CORPUS, os.path.splitext(name)[0] + ".findings"),
           listing(result.findings))


@pytest.mark.parametrize("name", PROGRAMS)
def test_fix(name, tmp_path):
    path = str(tmp_path / name)
    shutil.copy(os.path.join(CORPUS, name), path)
    before = engine.process(path)
    first = engine.process(path, fix=True)
    assert not first.errors and first.new_text is not None
    with open(path) as f:
        expect(os.path.join(CORPUS, fixed_name(name)), f.read())
    # what is left is exactly what had no fix, and a second run changes nothing
    assert sorted(f.code for f in first.findings) == sorted(
        f.code for f in before.findings if not f.fixable)
    second = engine.process(path, fix=True)
    assert second.new_text is None and second.fixed == 0


def test_every_program_has_something_left_to_fix_or_not():
    """The corpus covers the codes the issue names; keep it that way."""
    found = set()
    for name in PROGRAMS:
        found |= {f.code for f in engine.process(os.path.join(CORPUS, name)).findings}
    assert {"TNP001", "TNP002", "TNP004", "TNP005", "TNP009", "TNP101", "TNP103", "TNP105",
            "TNP106", "TNP107", "TNP108", "TNP110", "TNP112", "TNP201", "TNP202", "TNP301",
            "TNP303", "TNP401", "TNP501", "TNP502"} <= found


def _flatten(value):
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _flatten(value[k])]
    if isinstance(value, list):
        return [x for v in value for x in _flatten(v)]
    return [float(value)]


def test_device_type_idiom_keeps_mixed_precision_on_neuron(corpus_runs):
    """gpt_train decides autocast, bf16 and fused AdamW from `device_type`: rewritten, they are
    on where there is an accelerator (as on CUDA) and off without one, never silently lost."""
    seen = {}
    for device in ("cpu", "neuron"):
        with open(os.path.join(corpus_runs[device], "gpt_train.fixed.py.json.precision.json")) as f:
            seen[device] = json.load(f)
    assert seen["neuron"] == {"device_type": "neuron", "dtype": "bfloat16", "fused": True,
                              "autocast": True}
    assert seen["cpu"] == {"device_type": "cpu", "dtype": "float16", "fused": False,
                           "autocast": False}


@pytest.mark.parametrize("name", PROGRAMS)
def test_rewritten_program_runs_the_same_on_neuron_and_cpu(name, corpus_runs):
    results = {}
    for device in ("cpu", "neuron"):
        path = os.path.join(corpus_runs[device], fixed_name(name) + ".json")
        assert os.path.exists(path), f"{fixed_name(name)} wrote no result on {device}"
        with open(path) as f:
            results[device] = json.load(f)
    assert results["cpu"].keys() == results["neuron"].keys()
    torch.testing.assert_close(torch.tensor(_flatten(results["neuron"]), dtype=torch.float64),
                               torch.tensor(_flatten(results["cpu"]), dtype=torch.float64),
                               **(dict(rtol=0, atol=0) if name in EXACT
                                  else TOLERANCE.get(name, dict(rtol=1e-4, atol=1e-6))))


@pytest.mark.parametrize("name", REGRESS)
def test_fixed_program_equals_the_original_on_cpu(name, corpus_runs):
    """A fix never makes a program worse: where there is no accelerator it is the same program."""
    results = {}
    for run in (name, fixed_name(name)):
        with open(os.path.join(corpus_runs["cpu"], run + ".json")) as f:
            results[run] = json.load(f)
    assert results[fixed_name(name)] == results[name]


def test_cuda_autocast_keeps_float16_with_its_scaler(corpus_runs):
    """`torch.cuda.amp.autocast()` means float16: on neuron the fixed program computes in float16
    with a live GradScaler; on the CPU both stay off, as the original had them."""
    seen = {}
    for device in ("cpu", "neuron"):
        path = os.path.join(corpus_runs[device], "regress_amp.fixed.py.json.precision.json")
        with open(path) as f:
            seen[device] = json.load(f)
    assert seen["neuron"]["dtypes"] == ["torch.float16"]
    assert seen["cpu"] == {"dtypes": ["torch.float32"], "scale": 1.0}
    assert seen["neuron"]["scale"] > 1.0
