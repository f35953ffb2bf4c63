"""`torchneuron predict` (torchneuron/timemodel/cli.py): its report, and its refusals."""

from __future__ import annotations

import pytest

from torchneuron import cli


def test_predict_prints_the_step_and_where_it_goes(capsys):
    assert cli.main(["predict", "--model", "llama-2-7b", "--machine", "trn1", "--tp", "8",
                     "--context", "1024"]) == 0
    out = capsys.readouterr().out
    assert "llama-2-7b decode on trn1 (8 ranks tp=8 dp=1)" in out
    assert "step:" in out and "tokens/s" in out and "collectives" in out
    assert "engines summed over ops" in out and "top ops: mm" in out
    assert "HBM per rank: " in out and "(fits;" in out


def test_predict_refuses_a_layout_that_does_not_divide_the_ranks():
    with pytest.raises(ValueError, match="does not divide the 10 ranks"):
        cli.main(["predict", "--model", "llama-2-7b", "--ranks", "10", "--tp", "4"])


def test_predict_refuses_an_unknown_machine(capsys):
    with pytest.raises(SystemExit):
        cli.main(["predict", "--model", "llama-2-7b", "--machine", "tpu"])
    assert "invalid choice: 'tpu'" in capsys.readouterr().err
