"""The readiness page in a real browser: headless Chromium (Debian's package, `make chromium`)
opens report.html from a file, and the DOM it leaves has the headline, the changes, a bar per step,
a memory row per machine and a row per op; the browser's console logs no error."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import torchneuron

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(torchneuron.__file__)))

SCRIPT = """\
import torch
model = torch.nn.Linear(8, 4).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(16, 8, device="neuron")).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item())
"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: run `make chromium`")
def test_readiness_page_in_headless_chromium(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "torchneuron.cli", "readiness", "--out", str(out),
                          str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    page = out / "report.html"

    browser = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert browser.returncode == 0, browser.stderr[-2000:]
    dom = browser.stdout
    for part in ("headline", "changes", "step-chart", "memory", "ops"):
        assert f'id="{part}"' in dom, part
    assert dom.count('class="step-bar') == report["steps"]["count"] == 3
    assert dom.count('class="memory-row') == 2  # trn2 and trn3
    assert dom.count('class="op-row') == len(report["ops"]) > 0
    assert "train.py:9" in dom  # the .item() change, at its line
    console = [line for line in browser.stderr.splitlines() if "CONSOLE" in line]
    assert not [line for line in console if "ERROR" in line or "Uncaught" in line], console

