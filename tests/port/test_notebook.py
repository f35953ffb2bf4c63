"""Notebooks: findings point at a cell, and a fix touches only the code it rewrites (magics,
outputs, metadata, markdown and the JSON layout stay as they were)."""

import json

from torchneuron.port import engine


def notebook(*cells, indent=1):
    def cell(src):
        if src.startswith("md:"):
            return {"cell_type": "markdown", "metadata": {}, "source": [src[3:]]}
        return {"cell_type": "code", "execution_count": 3, "metadata": {"tags": ["t"]},
                "outputs": [{"output_type": "stream", "name": "stdout", "text": ["cuda\n"]}],
                "source": src.splitlines(keepends=True)}
    return json.dumps({"cells": [cell(c) for c in cells], "metadata": {"k": 1},
                       "nbformat": 4, "nbformat_minor": 5}, indent=indent) + "\n"


def test_findings_name_the_cell(tmp_path):
    path = tmp_path / "n.ipynb"
    path.write_text(notebook("md:# title", "import torch", "!nvidia-smi\nx = torch.ones(1).cuda()"))
    result = engine.process(str(path))
    assert [(f.cell, f.line, f.col, f.code) for f in result.findings] == [(3, 2, 19, "TNP001")]


def test_fix_keeps_everything_but_the_code(tmp_path):
    path = tmp_path / "n.ipynb"
    original = notebook("md:cuda is great", "%load_ext autoreload\nimport torch",
                        "%%time\nx = torch.ones(1).cuda()\ny = !ls\nprint(x)",
                        "%%bash\necho cuda", "z = 1", indent=2)
    path.write_text(original)
    result = engine.process(str(path), fix=True)
    assert result.errors == [] and result.fixed == 1
    before, after = json.loads(original), json.loads(path.read_text())
    assert after["cells"][2]["source"] == [
        "%%time\n", "x = torch.ones(1).to(torch.accelerator.current_accelerator(check_available=True))\n",
        "y = !ls\n", "print(x)"]
    after["cells"][2]["source"] = before["cells"][2]["source"]
    assert after == before
    assert path.read_text().startswith('{\n  "cells"')  # the indent of the original


def test_missing_import_goes_into_the_first_code_cell(tmp_path):
    path = tmp_path / "n.ipynb"
    path.write_text(notebook("md:x", "a = 1", "b = a.cuda()"))
    engine.process(str(path), fix=True)
    cells = json.loads(path.read_text())["cells"]
    assert cells[1]["source"][0] == "import torch\n"
    assert "".join(cells[2]["source"]) == "b = a.to(torch.accelerator.current_accelerator(check_available=True))"


def test_a_broken_cell_is_reported_and_the_others_fixed(tmp_path):
    path = tmp_path / "n.ipynb"
    path.write_text(notebook("import torch", "def f(:\n  x.cuda()", "y = torch.ones(1).cuda()"))
    result = engine.process(str(path), fix=True)
    assert result.errors == ["cell 2: skipped, 1:7: syntax error: invalid syntax"]
    cells = json.loads(path.read_text())["cells"]
    assert "".join(cells[1]["source"]) == "def f(:\n  x.cuda()"
    assert ".to(torch.accelerator" in "".join(cells[2]["source"])


def test_source_as_a_string_stays_a_string(tmp_path):
    path = tmp_path / "n.ipynb"
    doc = json.loads(notebook("import torch"))
    doc["cells"][0]["source"] = "import torch\ntorch.cuda.synchronize()\n"
    path.write_text(json.dumps(doc))
    engine.process(str(path), fix=True)
    assert json.loads(path.read_text())["cells"][0]["source"] == (
        "import torch\nif torch.accelerator.is_available(): torch.accelerator.synchronize()\n")
