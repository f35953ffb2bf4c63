"""`torchneuron readiness` end to end: a small training script with known costs (an `.item()`
per step, a float64 op per step) runs through the command in a child process; its exit status,
terminal summary, report.json and report.html are checked against those costs. Bad input: a
missing script, a script that raises, a script that never uses the device."""

import json
import os
import subprocess
import sys
from html.parser import HTMLParser

import pytest

import torchneuron
from torchneuron.cli import main

# The child runs from the script's folder: this checkout's torchneuron must come first there too.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(torchneuron.__file__)))

TRAIN = """\
import torch
model = torch.nn.Linear(8, 4).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(16, 8, device="neuron")
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    seen = loss.item()
    scale = torch.ones(4, device="neuron", dtype=torch.float64) * 2
print("trained", {extra})
"""


def _readiness(tmp_path, script_text, *extra):
    script = tmp_path / "train.py"
    script.write_text(script_text)
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "torchneuron.cli", "readiness", "--out",
                             str(out), str(script), *extra], capture_output=True, text=True,
                            cwd=tmp_path, timeout=300,
                            env={**os.environ, "PYTHONPATH": ROOT})
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    html = (out / "report.html").read_text() if (out / "report.html").exists() else None
    return result, report, html


class _Elements(HTMLParser):
    """Ids, classes and tag counts of a page, to find its parts without a browser."""

    def __init__(self):
        super().__init__()
        self.ids, self.classes, self.tags = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        self.classes += (attrs.get("class") or "").split()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return _readiness(tmp_path_factory.mktemp("train"), TRAIN.format(extra="'--lr'"), "--lr")


def test_training_script_report_counts_its_costs_at_its_lines(trained):
    result, report, _ = trained
    assert result.returncode == 0, result.stderr
    assert report["status"] == "ok" and report["touched_neuron"] and report["argv"] == ["--lr"]
    assert report["steps"]["kind"] == "optimizer" and report["steps"]["count"] == 3
    assert [r["step"] for r in report["steps"]["rows"]] == [1, 2, 3]
    syncs = report["accounting"]["syncs"]
    assert syncs["by_cause"] == {"item": 3}
    assert syncs["sites"][0]["location"].endswith("train.py:10")
    fallbacks = report["accounting"]["host_fallbacks"]["ops"]
    assert any(r["location"].endswith("train.py:11") and r["calls"] == 3 for r in fallbacks)
    where = {c["location"].rsplit("/", 1)[-1] for c in report["changes"]}
    assert {"train.py:10", "train.py:11"} <= where
    assert 0 < len(report["changes"]) <= 5


def test_training_script_step_is_priced_on_trn2_and_trn3(trained):
    _, report, _ = trained
    est = report["estimate"]
    assert report["traced_step"] == 2 and est["dtype"] == "float32"
    # One step: the linear layer's forward (addmm, 2*16*8*4 FLOPs) and its weight's gradient
    # (mm, the same; the input needs none), on neuron only; the update's FLOPs are not counted.
    assert est["flops"] == 2 * 2 * 16 * 8 * 4
    for name in ("trn2", "trn3"):
        m = est["machines"][name]
        assert m["step_seconds_graph"] > 0 and m["step_seconds_eager"] >= m["step_seconds_graph"]
        assert m["fits"] and 0 < m["mfu_graph"] < 1
    names = {r["op"] for r in report["ops"]}
    assert {"addmm", "mm"} <= names or "addmm" in names
    assert "_local_scalar_dense (host)" in names


def test_training_script_summary_and_progress_in_the_terminal(trained):
    result, report, _ = trained
    assert "trained --lr" in result.stdout  # the script's own output, its argv unchanged
    assert "readiness: step 3" in result.stderr
    assert "torchneuron readiness:" in result.stdout and "trn2:" in result.stdout
    assert "train.py:10" in result.stdout and "changes that matter most:" in result.stdout


def test_training_script_html_page_has_its_parts(trained):
    _, report, html = trained
    page = _Elements()
    page.feed(html)
    assert {"headline", "changes", "step-chart", "memory", "ops"} <= page.ids
    assert page.classes.count("step-bar") == 3
    assert page.classes.count("memory-row") == 2
    assert page.classes.count("op-row") == len(report["ops"])
    assert page.classes.count("change") == len(report["changes"])
    assert "<script" not in html and "http" not in html  # self-contained: nothing to fetch


def test_a_missing_script_is_named_and_exits_2(tmp_path, capsys):
    assert main(["readiness", "--out", str(tmp_path), str(tmp_path / "nope.py")]) == 2
    assert f"no such script: {tmp_path / 'nope.py'}" in capsys.readouterr().err


def test_a_script_that_raises_reports_what_ran_and_the_error(tmp_path):
    text = TRAIN.replace("    seen = loss.item()\n",
                         "    seen = loss.item()\n    if step == 1: raise ValueError('bad batch')\n")
    result, report, html = _readiness(tmp_path, text.format(extra="1"))
    assert result.returncode == 1
    assert report["status"] == "raised" and report["steps"]["count"] == 2
    assert report["error"]["type"] == "ValueError" and report["error"]["message"] == "bad batch"
    assert report["error"]["location"].endswith("train.py:11")
    assert report["accounting"]["syncs"]["count"] == 2
    assert "the script raised ValueError: bad batch" in result.stdout
    assert 'id="error"' in html and "bad batch" in html


def test_a_script_that_never_uses_neuron_says_so(tmp_path):
    result, report, html = _readiness(tmp_path, "import torch\nprint(torch.ones(2).sum())\n")
    assert result.returncode == 3
    assert not report["touched_neuron"] and report["steps"]["kind"] == "none"
    assert "never used the neuron device" in result.stdout
    assert 'id="no-neuron"' in html


def test_an_unreadable_compare_report_is_named(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    bad = tmp_path / "old.json"
    bad.write_text("{not json")
    assert main(["readiness", "--compare", str(bad), str(script)]) == 2
    assert f"cannot read the report to compare with {bad}" in capsys.readouterr().err


@pytest.mark.slow
def test_a_script_that_runs_out_of_memory_leads_with_the_advisors_changes(tmp_path):
    text = ("import torch\nmodel = torch.nn.Linear(64, 64).to('neuron')\n"
            "xs = [torch.empty(1 << 30, device='neuron') for _ in range(40)]\n")
    result, report, html = _readiness(tmp_path, text)
    assert result.returncode == 1 and report["error"]["type"] == "OutOfMemoryError"
    first = report["changes"][0]
    assert first["kind"] == "memory" and first["location"].endswith("train.py:3")
    assert "bf16 autocast" in first["change"]  # the advisor's suggestions, from the error
    assert report["accounting"]["memory"]["fits"] is False
    assert report["estimate"]["machines"]["trn2"]["fits"] is False
    assert report["estimate"]["machines"]["trn3"]["fits"] is None  # more HBM: unknown
    assert "DOES NOT FIT" in result.stdout


PROFILED = """\
import torch
model = torch.nn.Linear(8, 4).to("neuron")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for step in range(3):
        with torch.no_grad():
            model(torch.randn(2, 8, device="neuron"))
            model(torch.randn(2, 8, device="neuron"))
        prof.step()
print("profiled")
"""


@pytest.mark.slow
def test_a_profiler_step_ends_a_step_without_an_optimizer(tmp_path):
    result, report, _ = _readiness(tmp_path, PROFILED)
    assert result.returncode == 0, result.stderr
    # Two forwards per profiler step: the profiler's steps win over the forwards.
    assert report["steps"]["kind"] == "profiler" and report["steps"]["count"] == 3
    assert "ends at a profiler's step()" in result.stderr
