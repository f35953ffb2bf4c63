"""`torchneuron compat all`'s pieces without running a battery: outcomes read from run folders,
the comparison of two runs (regressions first, then new passes, then unchanged), the choice of
the previous run, the exit code, and the HTML page's embedded data."""

import json
import os

from torchneuron.compat import nightly, outcomes, report_page


def _model(model_type, build="pass", forward="pass", backward="pass"):
    return {"model_type": model_type, "class": "X", "family": "decoder LM", "head": "causal_lm",
            "build": build, "forward": forward, "backward": backward, "generate": "n/a",
            "max_abs_error": {"forward": 0.0}, "seconds": {"cpu": 0.1, "neuron": 0.2},
            "cause": None if forward != "cpu_fail" else "cpu forward: ValueError: x 12"}


def _peft(name, train):
    return {"name": name, "family": "lora", "train": train, "merge": "n/a",
            "max_abs_error": {}, "seconds": {"cpu": 0.1, "neuron": 0.1}, "cause": None}


def _write_run(folder, models, peft):
    from torchneuron.compat.models.report import totals
    from torchneuron.compat.staged import totals as staged_totals

    os.makedirs(folder)
    with open(os.path.join(folder, "models.json"), "w") as f:
        json.dump({"meta": {}, "totals": totals(models), "records": models}, f)
    stages = ["train", "merge"]
    with open(os.path.join(folder, "peft.json"), "w") as f:
        json.dump({"meta": {"battery": "peft", "stages": stages},
                   "totals": staged_totals(peft, stages), "records": peft}, f)


def test_outcomes_per_battery(tmp_path):
    run = str(tmp_path / "2026-01-01T000000Z")
    _write_run(run, [_model("llama"), _model("odd", forward="cpu_fail"),
                     _model("gpt2", backward="fail")], [_peft("lora / decoder", "pass")])
    assert outcomes.read(run) == {
        "models": {"llama": "pass", "odd": "not run", "gpt2": "fail"},
        "peft": {"lora / decoder": "pass"}}


def test_comparison_lists_regressions_then_new_passes_then_unchanged(tmp_path):
    before = {"models": {"llama": "pass", "gpt2": "fail", "bert": "pass", "t5": "pass"}}
    now = {"models": {"llama": "fail", "gpt2": "pass", "bert": "pass"}, "peft": {"x": "pass"}}
    diff = outcomes.compare(before, now)
    assert diff == {"models": {"regressions": ["llama", "t5"], "new_passes": ["gpt2"],
                               "unchanged": 1}}  # a battery new in this run has nothing to compare
    text = outcomes.comparison_markdown(diff, "runs/old")
    assert text.index("## Regressions") < text.index("- models: llama") < text.index(
        "## New passes") < text.index("- models: gpt2") < text.index("## Unchanged")


def test_previous_run_is_the_latest_earlier_folder_with_a_report(tmp_path):
    runs = tmp_path / "runs"
    _write_run(str(runs / "2026-01-01T000000Z"), [_model("llama")], [])
    _write_run(str(runs / "2026-01-02T000000Z"), [_model("llama")], [])
    os.makedirs(runs / "2026-01-03T000000Z")  # an interrupted run: no report, skipped
    current = str(runs / "2026-01-04T000000Z")
    assert nightly.previous_run(str(runs), current) == str(runs / "2026-01-02T000000Z")
    assert nightly.previous_run(str(runs), str(runs / "2026-01-01T000000Z")) is None
    assert nightly.previous_run(str(tmp_path / "none"), current) is None


def test_a_regression_makes_the_exit_code_one(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    first = str(runs / "2026-01-01T000000Z")
    _write_run(first, [_model("llama")], [_peft("lora / decoder", "pass")])
    from torchneuron.compat.models import command

    def run_with(records):
        def fake_models_run(args):
            scratch = str(tmp_path / f"scratch-{len(os.listdir(tmp_path))}")
            _write_run(scratch, records, [])
            os.replace(os.path.join(scratch, "models.json"), os.path.join(args.out, "models.json"))
            return 0
        monkeypatch.setattr(command, "run", fake_models_run)

    latest = tmp_path / "latest.html"
    args = nightly.argparse.Namespace(runs=str(runs), compare=None, batteries=["models"], jobs=1,
                                      models=None, html=str(latest))
    run_with([_model("llama", backward="fail")])
    assert nightly.run(args) == 1
    newest = max(os.listdir(runs))
    comparison = (runs / newest / "comparison.md").read_text()
    assert "- models: llama" in comparison.split("## New passes")[0]
    assert (runs / newest / "compat.html").read_text() == latest.read_text()

    # Named on the command line: compared with the first run, the same outcomes regress nothing.
    run_with([_model("llama"), _model("gpt2")])
    args.compare = first
    assert nightly.run(args) == 0


def test_battery_arguments_are_the_batteries_own_defaults(tmp_path):
    args = nightly.argparse.Namespace(jobs=3, models=["bert*"])
    ops = nightly.battery_arguments("ops", str(tmp_path), args)
    assert (ops.out, ops.jobs, ops.case_timeout) == (str(tmp_path), 3, 120.0)
    models = nightly.battery_arguments("models", str(tmp_path), args)
    assert models.only == ["bert*"] and models.timeout == 600.0 and models.jobs == 3


def test_html_page_embeds_totals_rows_and_families(tmp_path):
    run = str(tmp_path / "run")
    _write_run(run, [_model("llama"), _model("odd", forward="cpu_fail")],
               [_peft("lora / decoder", "pass"), _peft("lora </script> x", "fail")])
    page = report_page.write(run, str(tmp_path / "compat.html"))
    text = open(page).read()
    assert text.count("</script>") == 2  # a case name cannot end the data script early
    embedded = json.loads(text.split('type="application/json">')[1].split("</script>")[0]
                          .replace("<\\/", "</"))
    models = embedded["models"]
    assert ["model types", 2] in models["totals"] and ["tried", 1] in models["totals"]
    assert [(r["name"], r["outcome"]) for r in models["rows"]] == [("llama", "pass"), ("odd", "not run")]
    assert [r["outcome"] for r in embedded["peft"]["rows"]] == ["pass", "fail"]
