"""The demo through `torchneuron readiness`: a real training script (a small GPT, AdamW, an
`.item()` per step, a reference run on CPU beside it) gives a report whose steps are the device
optimizer's only, whose syncs are its `.item()`s at their line, and whose step is priced."""

import json
import os
import subprocess
import sys

import pytest

import torchneuron

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(torchneuron.__file__)))


def test_demo_report(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "torchneuron.cli", "readiness", "--out",
                             str(out), "demo/train_gpt.py", "--steps", "5"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == {**report["steps"], "kind": "optimizer", "count": 5}
    assert report["accounting"]["syncs"]["by_cause"] == {"item": 5}
    assert report["accounting"]["syncs"]["sites"][0]["location"] == "demo/train_gpt.py:45"
    est = report["estimate"]
    assert est["flops"] > 1e9 and est["dtype"] == "float32"
    for m in est["machines"].values():
        assert m["fits"] and 0 < m["mfu_graph"] < 1
    # The attention backward the accounting counts as a host fallback is priced as a stall.
    ops = {r["op"] for r in report["ops"]}
    assert "_scaled_dot_product_flash_attention_for_cpu_backward (host)" in ops
    assert est["machines"]["trn2"]["stall_seconds"] > 4 * 50e-6
    # After warm-up the demo's shapes do not change: no shape recompile is ranked.
    assert {c["kind"] for c in report["changes"]} <= {"host fallback", "sync"}
    assert any(c["location"] == "demo/train_gpt.py:45" for c in report["changes"])
    assert "changes that matter most:" in result.stdout
