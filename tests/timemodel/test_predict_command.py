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


def test_predict_prices_attention_as_asked(capsys):
    args = ["predict", "--model", "llama-2-7b", "--machine", "trn1", "--tp", "32",
            "--workload", "prefill", "--context", "4096", "--top", "1"]
    assert cli.main(args) == 0  # trn1's default: the score matrix through HBM
    assert "top ops: _scaled_dot_product" in capsys.readouterr().out
    assert cli.main(args + ["--attention", "flash"]) == 0
    assert "top ops: _scaled_dot_product" not in capsys.readouterr().out


def test_predict_refuses_an_unknown_attention(capsys):
    with pytest.raises(SystemExit):
        cli.main(["predict", "--model", "llama-2-7b", "--attention", "paged"])
    assert "invalid choice: 'paged'" in capsys.readouterr().err
