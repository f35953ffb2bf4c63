"""A Hugging Face Trainer script through `torchneuron readiness`: Trainer's own loop (accelerate's
optimizer wrapper around AdamW) ends a step at each optimizer.step(), and what it costs on
Trainium is found at the library lines that cause it; `--compare` against the same run's
report finds no regression."""

import json
import os
import subprocess
import sys

import pytest

import torchneuron

pytestmark = pytest.mark.slow
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(torchneuron.__file__)))

SCRIPT = """\
import tempfile
from transformers import Trainer, TrainingArguments
from tests.ecosystem.tiny import Tokens, llama

args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=4, learning_rate=1e-2,
                         per_device_train_batch_size=4, report_to=[], save_strategy="no",
                         logging_steps=1, seed=0, disable_tqdm=True)
Trainer(model=llama(), args=args, train_dataset=Tokens()).train()
"""


def _readiness(tmp_path, *extra):
    script = tmp_path / "hf_train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out"
    return subprocess.run([sys.executable, "-m", "torchneuron.cli", "readiness", "--out",
                           str(out), *extra, str(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT}), out


def test_trainer_script_report(tmp_path):
    result, out = _readiness(tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["steps"]["kind"] == "optimizer" and report["steps"]["count"] == 4
    syncs = report["accounting"]["syncs"]
    assert syncs["count"] >= 4 and any("transformers/trainer.py:" in s["location"]
                                       for s in syncs["sites"])
    assert report["estimate"]["flops"] > 0 and len(report["changes"]) == 5
    old = tmp_path / "old.json"
    old.write_text((out / "report.json").read_text())
    again, _ = _readiness(tmp_path, "--compare", str(old))
    assert again.returncode == 0, again.stderr[-3000:]
    first = again.stdout.split("compared with the old report:", 1)[1].splitlines()[0]
    # Counts are the same run's; a wall-clock-free figure only: the predicted step.
    assert "REGRESSION host syncs" not in again.stdout
    assert "REGRESSION trn2 step" not in again.stdout and first.strip().endswith("regression(s)")
