"""The small batteries' case runner (torchneuron/compat/staged.py): a case runs on the CPU and on
neuron from the same seed, each neuron stage judged against the CPU's; a CPU failure is
cpu_fail (not neuron's fault), a neuron error or difference is fail at the stage it happened,
and later stages stay n/a."""

import torch

from torchneuron.compat.staged import CPU_FAIL, FAIL, NA, PASS, Case, run_case, select, totals

STAGES = ("forward", "train")


def _linear_case(device, break_on=None, raise_on=None):
    model = torch.nn.Linear(4, 3).to(device)
    x = torch.randn(2, 4).to(device)
    if raise_on == device:
        raise RuntimeError(f"{device} cannot run this")
    out = model(x)
    yield "forward", out.detach() + (1.0 if break_on == device else 0.0)
    out.sum().backward()
    yield "train", [("weight", model.weight.grad), ("bias", model.bias.grad)]


def test_a_case_equal_on_both_devices_passes_every_stage():
    rec = run_case(Case("linear", "toy", _linear_case, STAGES), STAGES)
    assert [rec[s] for s in STAGES] == [PASS, PASS], rec["cause"]
    assert rec["max_abs_error"] == {"forward": 0.0, "train": 0.0}
    assert rec["cause"] is None


def test_a_neuron_difference_fails_that_stage_with_the_max_difference():
    rec = run_case(Case("off", "toy", lambda d: _linear_case(d, break_on="neuron"), STAGES), STAGES)
    assert (rec["forward"], rec["train"]) == (FAIL, NA)
    assert rec["cause"].startswith("neuron forward: Mismatch: forward:")
    assert "max abs 1" in rec["cause"]


def test_a_cpu_failure_is_cpu_fail_and_neuron_is_not_blamed():
    rec = run_case(Case("cpu", "toy", lambda d: _linear_case(d, raise_on="cpu"), STAGES), STAGES)
    assert (rec["forward"], rec["train"]) == (CPU_FAIL, NA)
    assert rec["cause"] == "cpu forward: RuntimeError: cpu cannot run this"
    t = totals([rec], STAGES)
    assert t["all_stages"] == {"runnable_on_cpu": 0, "pass_on_neuron": 0}


def test_a_neuron_error_is_fail_and_counted_against_neuron():
    rec = run_case(Case("dev", "toy", lambda d: _linear_case(d, raise_on="neuron"), STAGES), STAGES)
    assert (rec["forward"], rec["train"]) == (FAIL, NA)
    assert totals([rec], STAGES)["all_stages"] == {"runnable_on_cpu": 1, "pass_on_neuron": 0}


def test_select_by_pattern_and_refuses_an_empty_selection():
    import pytest

    cases = [Case(n, "toy", _linear_case, STAGES) for n in ("lora / decoder", "ia3 / encoder")]
    assert [c.name for c in select(cases, ["lora*"])] == ["lora / decoder"]
    assert select(cases, None) == cases
    with pytest.raises(SystemExit, match="no case matches"):
        select(cases, ["dora*"])


def test_the_report_states_models_per_minute_when_the_battery_has_models():
    from torchneuron.compat.staged import markdown

    def record(name, family, cpu, neuron):
        return {"name": name, "family": family, "forward": PASS, "train": NA, "cause": None,
                "max_abs_error": {}, "seconds": {"cpu": cpu, "neuron": neuron}}

    records = [record("resnet", "model:classification", 10.0, 5.0),
               record("vit", "timm:vision_transformer", 10.0, 5.0), record("nms", "ops", 30.0, 30.0)]
    doc = {"meta": {"battery": "vision", "torch": "2.14", "stages": list(STAGES), "seconds": 90.0},
           "totals": totals(records, STAGES), "records": records}
    assert "Models: 2 in 30 s of their cases (both devices), 4.0 per minute." in markdown(doc)
    doc["records"] = records[2:]
    assert "per minute" not in markdown(doc)
