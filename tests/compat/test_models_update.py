"""`torchneuron compat models --update` merges a partial run into the report already written:
the model types run now replace their records, the others are kept, and the meta says what
the report was made of."""

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
    assert meta["seconds"] == 1660.0 and meta["torch"] == "new"
    assert meta["minilm"] == {"ok": True}  # not run now: the previous result stays
