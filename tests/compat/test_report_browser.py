"""The HTML report in a real browser: headless Chromium (Debian's package, `make chromium`) opens
the page from a file, runs its script, and the DOM it leaves has a totals table, an SVG chart with
bars and a table row per case for every battery; sorting and filtering are checked by driving the
page's own handlers from a script appended for the test. A screenshot is saved."""

import json
import os
import shutil
import subprocess

import pytest

from torchneuron.compat import report_page

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _records():
    models = [{"model_type": t, "class": "X", "family": fam, "head": "causal_lm", "build": "pass",
               "forward": fwd, "backward": "pass" if fwd == "pass" else "n/a", "generate": "n/a",
               "max_abs_error": {"forward": 0.0}, "seconds": {"cpu": 0.1, "neuron": 0.2},
               "cause": None if fwd == "pass" else "cpu forward: ValueError: shape"}
              for t, fam, fwd in (("llama", "decoder LM", "pass"), ("bert", "encoder", "pass"),
                                  ("odd", "vision", "cpu_fail"))]
    peft = [{"name": f"{m} / decoder", "family": m, "train": "pass", "merge": "pass",
             "max_abs_error": {"train": 0.0}, "seconds": {"cpu": 1.0, "neuron": 2.0}, "cause": None}
            for m in ("lora", "dora", "ia3")]
    return models, peft


def _chromium(*args, cwd):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--user-data-dir=" + str(cwd / "profile"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=cwd)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed: run `make chromium`")
def test_report_page_in_headless_chromium(tmp_path):
    from torchneuron.compat.models.report import totals
    from torchneuron.compat.staged import totals as staged_totals

    run = tmp_path / "run"
    run.mkdir()
    models, peft = _records()
    (run / "models.json").write_text(json.dumps({"meta": {}, "totals": totals(models),
                                                 "records": models}))
    (run / "peft.json").write_text(json.dumps({
        "meta": {"battery": "peft", "stages": ["train", "merge"]},
        "totals": staged_totals(peft, ["train", "merge"]), "records": peft}))
    page = report_page.write(str(run), str(tmp_path / "compat.html"))
    # Drive the page as a reader would: sort peft by name descending, filter models to "bert".
    probe = """<script>
    const th = [...document.querySelectorAll('#table-peft th')].find(t => t.dataset.col === 'name');
    th.click(); th.click();
    const f = document.getElementById('filter-models'); f.value = 'bert';
    f.dispatchEvent(new Event('input'));
    document.body.setAttribute('data-peft-order',
      [...document.querySelectorAll('#table-peft tr.case td:first-child')].map(td => td.textContent).join(','));
    </script></body>"""
    with open(page) as f:
        text = f.read().replace("</body>", probe)
    probed = tmp_path / "probed.html"
    probed.write_text(text)

    dom = _chromium("--dump-dom", probed.as_uri(), cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    out = dom.stdout
    for battery in ("models", "peft"):
        assert f'id="battery-{battery}"' in out and f'id="plot-{battery}"' in out
        assert f'id="totals-{battery}"' in out
    assert out.count('class="bar"') >= 4  # models: 3 families; peft: 3 methods
    assert "<th>model types</th><td>3</td>" in out and "<th>tried</th><td>2</td>" in out
    assert 'data-peft-order="lora / decoder,ia3 / decoder,dora / decoder"' in out
    models_table = out.split('id="table-models"')[1].split("</table>")[0]
    assert models_table.count('class="case"') == 1 and ">bert<" in models_table

    shot = tmp_path / "compat.png"
    result = _chromium(f"--screenshot={shot}", "--window-size=1280,1600", f"file://{page}",
                       cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and os.path.getsize(shot) > 10_000
    keep = os.environ.get("TORCHNEURON_SCREENSHOT_DIR")
    if keep:  # CI or a reader can keep the picture
        shutil.copy(shot, keep)
