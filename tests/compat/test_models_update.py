"""`torchneuron compat models --update` merges a partial run into the report already written:
the model types run now replace their records, the others are kept, and the meta says what
the report was made of. Each record names the torch it ran under: the types that need timm run
in the torch 2.14 environment (`--needs-timm`, make compat-models-timm) and are merged into the
main environment's report, which shows which torch each ran under."""

import argparse
import json

import pytest

from torchneuron.compat.models import command, report
from torchneuron.compat.models.command import merged


def _rec(model_type: str, forward: str) -> dict:
    return {"model_type": model_type, "forward": forward}


def test_the_run_replaces_its_types_and_keeps_the_others_sorted():
    previous = {"meta": {"command": "torchneuron compat models --jobs 2", "seconds": 1600.0,
                         "minilm": {"ok": True}, "torch": "old"},
                "records": [_rec("bert", "pass"), _rec("dbrx", "cpu_fail"), _rec("llama", "pass")]}
    records, meta = merged(previous, [_rec("dbrx", "pass"), _rec("aimv2", "pass")],
                           {"command": "torchneuron compat models --only dbrx aimv2 --update",
                            "seconds": 60.0, "torch": "new"})
    assert [(r["model_type"], r["forward"]) for r in records] == [
        ("aimv2", "pass"), ("bert", "pass"), ("dbrx", "pass"), ("llama", "pass")]
    assert meta["command"] == ("torchneuron compat models --jobs 2, then torchneuron compat models "
                               "--only dbrx aimv2 --update (2 model types)")
    assert meta["seconds"] == 1660.0 and meta["torch"] == "old"  # the report's own torch stays
    assert meta["minilm"] == {"ok": True}  # not run now: the previous result stays
    # Records from before records named their torch ran under the previous report's.
    assert {r["model_type"]: r.get("torch") for r in records} == {
        "aimv2": None, "bert": "old", "dbrx": None, "llama": "old"}


def _full(model_type: str, torch: str, cause: str | None = None) -> dict:
    status = "cpu_fail" if cause else "pass"
    return {"model_type": model_type, "class": "C", "family": "vision", "build": status,
            "forward": "n/a" if cause else "pass", "backward": "n/a" if cause else "pass",
            "generate": "n/a", "cause": cause, "max_abs_error": {},
            "seconds": {"cpu": 1.0, "neuron": 1.0}, "torch": torch}


_TIMM = "cpu build: ImportError: TimmWrapperModel requires the timm library but it was not found"


def test_the_types_needing_timm_are_those_untried_for_it_and_those_run_for_it_before():
    main = [_full("bert", "2.13"), _full("gpt2", "2.13"), _full("oddity", "2.13", "cpu build: x")]
    previous = {"meta": {"torch": "2.13", "command": "torchneuron compat models", "seconds": 9.0},
                "records": main + [_full("timm_wrapper", "2.13", _TIMM)]}
    assert report.needing_timm(previous) == ["timm_wrapper"]
    records, meta = merged(previous, [_full("timm_wrapper", "2.14")],
                           {"command": "torchneuron compat models --needs-timm", "seconds": 1.0,
                            "torch": "2.14"})
    # The merged report still runs it again: it ran under another torch than the report's own,
    # however few the report's own types are.
    assert report.needing_timm({"meta": meta, "records": records}) == ["timm_wrapper"]
    assert report.needing_timm({"meta": meta, "records": records[-1:] + [
        _full(f"t{i}", "2.14") for i in range(5)]}) == ["timm_wrapper"] + [f"t{i}" for i in range(5)]
    assert report.untried_reason(_full("t", "2.13", _TIMM)) == report.NEEDS_TIMM


def test_the_report_says_which_torch_each_type_ran_under():
    records = [_full("bert", "2.13"), _full("detr", "2.14"), _full("gpt2", "2.13")]
    text = report.markdown(records, {"transformers": "5", "torch": "2.13", "command": "c"})
    assert "torch 2.13 (2 model types); torch 2.14 (1 model types: detr)" in text
    assert "| s neuron | torch | cause |" in text
    assert "| detr | C | vision | pass | pass | pass | n/a |  | 1.00 | 1.00 | 2.14 |  |" in text
    one = report.markdown(records[:1], {"transformers": "5", "torch": "2.13", "command": "c"})
    assert "transformers 5, torch 2.13;" in one and "| torch |" not in one  # one torch: no column


def _needs_timm(tmp_path) -> argparse.Namespace:
    return argparse.Namespace(only=None, sample=False, update=False, needs_timm=True,
                              out=str(tmp_path))


def test_needs_timm_without_a_report_to_merge_into_says_so(tmp_path):
    with pytest.raises(SystemExit, match="no report to merge into: .*models.json does not exist"):
        command.run(_needs_timm(tmp_path))


def test_needs_timm_with_a_report_that_names_none_says_so(tmp_path):
    (tmp_path / "models.json").write_text(json.dumps(
        {"meta": {"torch": "2.13"}, "records": [_full("bert", "2.13")]}))
    with pytest.raises(SystemExit, match="names no model type that needs timm"):
        command.run(_needs_timm(tmp_path))
