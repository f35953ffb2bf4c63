"""Input the tool cannot read is reported and skipped; the run goes on and no such file, nor
any file whose rewrite would not parse, is ever written."""

import os
import stat

import libcst as cst

from torchneuron.port import cli, engine

CUDA = "import torch\nx = torch.ones(2).cuda()\n"


def run(capsys, *argv):
    code = cli.main(list(argv))
    return (code, *capsys.readouterr())


def test_bad_files_are_reported_and_skipped(tmp_path, capsys):
    (tmp_path / "good.py").write_text(CUDA)
    (tmp_path / "syntax.py").write_text("import torch\nx = torch.ones(2).cuda(\n")
    (tmp_path / "syntax_plain.py").write_text("def f(:\n    pass\n")  # nothing to find in it
    (tmp_path / "binary.py").write_bytes(b"\x7fELF\x00\x01cuda")
    (tmp_path / "latin1.py").write_bytes("# caf\xe9\nx.cuda()\n".encode("latin-1"))
    (tmp_path / "broken.ipynb").write_text("{not json")
    originals = {p: p.read_bytes() for p in tmp_path.iterdir()}
    code, out, err = run(capsys, "fix", str(tmp_path))
    assert code == 2  # good.py is fixed, nothing is left, but not every file could be read
    assert f"{tmp_path / 'syntax.py'}: error: 2:23: syntax error: '(' was never closed" in err
    assert f"{tmp_path / 'syntax_plain.py'}: error: 1:7: syntax error: invalid syntax" in err
    assert f"{tmp_path / 'binary.py'}: error: binary file" in err
    assert f"{tmp_path / 'latin1.py'}: error: not UTF-8" in err
    assert f"{tmp_path / 'broken.ipynb'}: error: not a notebook" in err
    assert "5 files could not be checked" in out
    for path, data in originals.items():
        if path.name != "good.py":
            assert path.read_bytes() == data, f"{path.name} was written"
    assert ".to(torch.accelerator" in (tmp_path / "good.py").read_text()


def test_only_errors_exit_2(tmp_path, capsys):
    (tmp_path / "syntax.py").write_text("x = (\n")
    assert run(capsys, "check", str(tmp_path))[0] == 2
    assert run(capsys, "check", str(tmp_path / "missing.py"))[0] == 2


def test_a_rewrite_that_does_not_parse_is_never_written(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_text(CUDA)

    class Broken:
        code = "x = torch.ones(2).to(\n"

    monkeypatch.setattr(engine, "rewrite", lambda module, scan: Broken())
    result = engine.process(str(path), fix=True)
    assert path.read_text() == CUDA
    assert result.errors and "does not parse" in result.errors[0]


def test_a_rewrite_that_does_not_compile_is_never_written(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_text(CUDA)
    good = engine.rewrite

    def duplicate_argument(module, scan):  # parses, but Python rejects it
        code = good(module, scan).code.replace(".to(", ".to(x=1, x=")
        return cst.parse_module(code)

    monkeypatch.setattr(engine, "rewrite", duplicate_argument)
    result = engine.process(str(path), fix=True)
    assert path.read_text() == CUDA and "does not compile" in result.errors[0]


def test_encoding_details_survive_a_fix(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"\xef\xbb\xbfimport torch\r\nx = torch.ones(2).cuda()  # caf\xc3\xa9\r\n")
    os.chmod(path, 0o750)
    engine.process(str(path), fix=True)
    data = path.read_bytes()
    assert data == (b"\xef\xbb\xbfimport torch\r\nx = torch.ones(2).to("
                    b"torch.accelerator.current_accelerator(check_available=True))  # caf\xc3\xa9\r\n")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o750
    assert not [p for p in tmp_path.iterdir() if p.name != "a.py"]  # no temporary left


def test_empty_and_deeply_nested_files(tmp_path):
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "deep.py").write_text("x = " + "(" * 5000 + "1" + ")" * 5000 + "  # cuda\n")
    assert engine.process(str(tmp_path / "empty.py")).errors == []
    deep = engine.process(str(tmp_path / "deep.py"))
    assert deep.errors and deep.findings == []
