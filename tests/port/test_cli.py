"""`torchneuron port check|fix|codes` as a user runs it: output format, exit status, options."""

import json
import os
import re

import pytest

from torchneuron.port import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+) (?P<code>TNP\d{3}) (?P<msg>.+)$")
CUDA = "import torch\nx = torch.ones(2).cuda()\ntorch.backends.cudnn.benchmark = True\n"
CLEAN = "import torch\nx = torch.ones(2)\n"


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text(CUDA)
    (tmp_path / "pkg" / "sub" / "b.py").write_text(CLEAN)
    (tmp_path / "pkg" / "notes.txt").write_text("x.cuda()\n")  # not Python: not read
    (tmp_path / "pkg" / ".hidden").mkdir()
    (tmp_path / "pkg" / ".hidden" / "c.py").write_text(CUDA)  # hidden: not entered
    return tmp_path / "pkg"


def test_check_lists_findings_and_exits_1(tree, capsys):
    code, out, _ = run(capsys, "check", str(tree))
    assert code == 1
    lines = [m.groupdict() for m in map(LINE.match, out.splitlines()) if m]
    assert [(d["path"], d["line"], d["col"], d["code"]) for d in lines] == [
        (str(tree / "a.py"), "2", "19", "TNP001"), (str(tree / "a.py"), "3", "1", "TNP301")]
    assert "hint:" in lines[1]["msg"] and "->" in lines[0]["msg"]
    assert re.search(r"^  TNP001 +1 ", out, re.M) and re.search(r"^  TNP301 +1 ", out, re.M)
    assert "Found 2 findings in 1 of 2 files (1 fixable" in out


def test_check_clean_exits_0(tmp_path, capsys):
    (tmp_path / "ok.py").write_text(CLEAN)
    code, out, err = run(capsys, "check", str(tmp_path))
    assert code == 0 and "Found 0 findings" in out and not err


def test_json(tree, capsys):
    code, out, _ = run(capsys, "check", "--format", "json", str(tree))
    doc = json.loads(out)
    assert code == 1 and doc["files"] == 2 and doc["summary"] == {"TNP001": 1, "TNP301": 1}
    first = doc["findings"][0]
    assert (first["code"], first["line"], first["col"], first["fixable"], first["cell"]) == (
        "TNP001", 2, 19, True, None)
    assert doc["findings"][1]["hint"] and doc["errors"] == []


def test_select_and_ignore(tree, capsys):
    out = run(capsys, "check", "--select", "TNP3", str(tree))[1]
    assert [m["code"] for m in map(LINE.match, out.splitlines()) if m] == ["TNP301"]
    code, out, _ = run(capsys, "check", "--ignore", "TNP001,TNP3", str(tree))
    assert code == 0 and "TNP" not in out.split("Found")[0]


def test_noqa_silences_one_code(tmp_path, capsys):
    f = tmp_path / "a.py"
    f.write_text("import torch\ntorch.cuda.synchronize()  # noqa: TNP105\nx = 1  # noqa\n")
    assert run(capsys, "check", str(f))[0] == 0
    f.write_text("import torch\ntorch.cuda.synchronize()  # noqa: TNP001\n")
    assert run(capsys, "check", str(f))[0] == 1


def test_fix_diff_writes_nothing(tree, capsys):
    before = (tree / "a.py").read_text()
    code, out, err = run(capsys, "fix", "--diff", str(tree))
    assert (tree / "a.py").read_text() == before
    assert out.startswith(f"--- a/{str(tree / 'a.py').lstrip('/')}")
    assert "+x = torch.ones(2).to(torch.accelerator.current_accelerator(check_available=True))" in out
    assert "TNP301" in err and "Fixed 1 finding in 1 file; 1 left" in err
    assert code == 1  # the cudnn switch is still there


def test_fix_writes_then_nothing_left_to_fix(tree, capsys):
    code, out, _ = run(capsys, "fix", str(tree))
    assert code == 1 and "Fixed 1 finding in 1 file; 1 left in 1 file." in out
    assert ".to(torch.accelerator.current_accelerator(check_available=True))" in (tree / "a.py").read_text()
    code, out, _ = run(capsys, "fix", str(tree))
    assert "Fixed 0 findings in 0 files; 1 left" in out
    code, out, _ = run(capsys, "fix", "--ignore", "TNP301", str(tree))
    assert code == 0


def test_codes_table_is_the_one_in_the_docs(capsys):
    code, out, _ = run(capsys, "codes")
    with open(os.path.join(REPO, "docs", "port.md")) as f:
        assert out in f.read()


def test_the_torchneuron_command(tmp_path, capsys):
    from torchneuron import cli as torchneuron_cli

    (tmp_path / "a.py").write_text(CUDA)
    assert torchneuron_cli.main(["port", "check", str(tmp_path / "a.py")]) == 1
    assert " TNP001 " in capsys.readouterr().out


def test_jobs_give_the_same_answer(tree, capsys):
    (tree / "sub" / "c.py").write_text(CUDA.replace("benchmark", "deterministic"))
    one = run(capsys, "check", "--format", "json", str(tree))
    two = run(capsys, "check", "--format", "json", "-j", "2", str(tree))
    assert one == two and json.loads(one[1])["summary"]["TNP302"] == 1
