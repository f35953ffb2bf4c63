"""The vision and timm batteries need libraries that install beside torch 2.14.1 only: without
them the commands say where to run them, and `compat all` leaves them out, saying so, unless
--vision-python names the environment that has them."""

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
