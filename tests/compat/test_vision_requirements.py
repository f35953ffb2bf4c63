"""The vision and timm batteries need libraries that install beside torch 2.14.1 only: without
them the commands say where to run them, and `compat all` leaves them out, saying so, unless
--vision-python names the environment that has them; there it also runs the model types the
model battery left untried for want of timm (`compat models --needs-timm`)."""

import argparse
import importlib.util

import pytest

from torchneuron.compat import nightly
from torchneuron.compat.vision import command, timm_command


def _without(monkeypatch, *names):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in names else real(name, *a))


def test_vision_without_torchvision_names_the_environment_to_use(monkeypatch):
    _without(monkeypatch, "torchvision")
    with pytest.raises(SystemExit, match=r"needs torchvision.*make setup-214"):
        command.run(argparse.Namespace(only=None, out="unused"))


def test_timm_without_timm_names_the_environment_to_use(monkeypatch):
    _without(monkeypatch, "timm")
    with pytest.raises(SystemExit, match=r"needs timm.*make setup-214"):
        timm_command.run(argparse.Namespace(only=None, out="unused"))


def test_compat_all_leaves_out_the_vision_batteries_without_their_environment(
        monkeypatch, tmp_path, capsys):
    _without(monkeypatch, "torchvision", "timm")
    args = argparse.Namespace(runs=str(tmp_path / "runs"), compare=None,
                              batteries=["vision", "timm"], jobs=1, models=None, html=None,
                              vision_python=None)
    assert nightly.run(args) == 0
    err = capsys.readouterr().err
    assert "vision: not run, this environment lacks torchvision" in err
    assert "timm: not run, this environment lacks timm" in err


_NEEDS_TIMM = "cpu build: ImportError: TimmWrapperModel requires the timm library but it was not found"


def _models_run_writing(monkeypatch, records):
    """The model battery replaced by one that writes `records` as its report."""
    import json
    import os

    from torchneuron.compat.models import command
    from torchneuron.compat.models.report import totals

    def fake_run(args):
        with open(os.path.join(args.out, "models.json"), "w") as f:
            json.dump({"meta": {"torch": "2.13.0"}, "totals": totals(records),
                       "records": records}, f)
        return 0

    monkeypatch.setattr(command, "run", fake_run)


def _record(model_type, cause=None):
    stages = ("cpu_fail", "n/a", "n/a") if cause else ("pass", "pass", "pass")
    return {"model_type": model_type, "class": "X", "family": "vision", "head": "base",
            "build": stages[0], "forward": stages[1], "backward": stages[2], "generate": "n/a",
            "max_abs_error": {}, "seconds": {"cpu": 0.1, "neuron": 0.1}, "cause": cause}


def _models_args(tmp_path, vision_python):
    return argparse.Namespace(runs=str(tmp_path / "runs"), compare=None, batteries=["models"],
                              jobs=2, models=None, html=None, vision_python=vision_python)


def test_compat_all_runs_the_model_types_needing_timm_in_the_vision_environment(
        monkeypatch, tmp_path):
    _without(monkeypatch, "timm")
    _models_run_writing(monkeypatch, [_record("bert"), _record("timm_wrapper", _NEEDS_TIMM)])
    calls = []
    monkeypatch.setattr(nightly.subprocess, "run",
                        lambda argv: calls.append(argv) or argparse.Namespace(returncode=0))
    assert nightly.run(_models_args(tmp_path, "/envs/214/bin/python")) == 0
    (argv,) = calls
    folder = argv[argv.index("--out") + 1]
    assert argv[:6] == ["/envs/214/bin/python", "-m", "torchneuron.cli", "compat", "models",
                        "--needs-timm"]
    assert argv[argv.index("--jobs") + 1] == "2" and folder.startswith(str(tmp_path / "runs"))

    # Its failure to run is the run's failure, as any battery's is.
    monkeypatch.setattr(nightly.subprocess, "run", lambda argv: argparse.Namespace(returncode=2))
    assert nightly.run(_models_args(tmp_path, "/envs/214/bin/python")) == 1


def test_compat_all_says_when_it_leaves_the_model_types_needing_timm_out(
        monkeypatch, tmp_path, capsys):
    _without(monkeypatch, "timm")
    _models_run_writing(monkeypatch, [_record("timm_wrapper", _NEEDS_TIMM)])
    monkeypatch.setattr(nightly.subprocess, "run", lambda argv: pytest.fail(f"ran {argv}"))
    assert nightly.run(_models_args(tmp_path, None)) == 0
    assert "models: 1 model types that need timm not run" in capsys.readouterr().err


def test_compat_all_runs_no_timm_step_where_nothing_needs_it(monkeypatch, tmp_path):
    monkeypatch.setattr(nightly.subprocess, "run", lambda argv: pytest.fail(f"ran {argv}"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",  # timm here: the battery ran them itself
                        lambda name, *a: object() if name == "timm" else real(name, *a))
    _models_run_writing(monkeypatch, [_record("timm_wrapper", _NEEDS_TIMM)])
    assert nightly.run(_models_args(tmp_path, "/envs/214/bin/python")) == 0
    monkeypatch.setattr(importlib.util, "find_spec", real)
    _without(monkeypatch, "timm")
    _models_run_writing(monkeypatch, [_record("bert")])  # no type untried for want of timm
    assert nightly.run(_models_args(tmp_path, "/envs/214/bin/python")) == 0
