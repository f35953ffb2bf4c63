"""`import nki` (and `torch_neuronx`, bound the way its shim will bind it) give torchneuron's
implementations where AWS's packages are absent or only PyPI's placeholder releases are
installed, and AWS's real packages where they are installed (simulated by fake distributions on
sys.path), whichever comes first on the path."""

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_python

REPO = Path(__file__).resolve().parents[2]


def fake_distribution(root: Path, dist: str, version: str, package: str, body: str) -> None:
    """An installed distribution `dist`==`version` shipping package/__init__.py."""
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text(body)
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{package}/__init__.py,,\n")


def run_with_path(code: str, *paths: Path):
    env = {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)}
    result = run_python(textwrap.dedent(code), env=env, timeout=180)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_without_aws_packages_the_names_are_torchneurons():
    out = run_with_path("""
        import nki, nki.language as nl, nki.isa as nisa
        from torchneuron.import_names import bind
        bind("torch_neuronx")  # what the torch_neuronx shim does
        from torch_neuronx import nki_op
        import torchneuron.kernels.nki as ours
        assert nki is ours and nl is ours.language and nisa is ours.isa
        assert nki_op.__module__ == "torchneuron.kernels.nki_op"
        print("ok")
    """, REPO)
    assert out.strip() == "ok"


@pytest.mark.parametrize("order", ["repo first",
                                   pytest.param("aws first", marks=pytest.mark.slow)])
def test_aws_real_packages_are_never_shadowed(tmp_path, order):
    fake_distribution(tmp_path, "nki", "0.7.0", "nki", "REAL = 'aws nki'\n")
    (tmp_path / "nki" / "language.py").write_text("REAL = 'aws nki.language'\n")
    fake_distribution(tmp_path, "torch-neuronx", "2.9.0.2.12.0", "torch_neuronx",
                      "REAL = 'aws torch_neuronx'\n")
    paths = (REPO, tmp_path) if order == "repo first" else (tmp_path, REPO)
    out = run_with_path("""
        import nki, nki.language
        from torchneuron.import_names import bind
        torch_neuronx = bind("torch_neuronx")
        print(nki.REAL, nki.language.REAL, torch_neuronx.REAL, sep="|")
    """, *paths)
    assert out.strip() == "aws nki|aws nki.language|aws torch_neuronx"


def test_pypi_placeholders_do_not_break_the_names(tmp_path):
    fake_distribution(tmp_path, "nki", "0.0.1", "nki",
                      "raise ImportError('placeholder: install nki from AWS')\n")
    fake_distribution(tmp_path, "torch-neuronx", "1.0", "torch_neuronx",
                      "raise ImportError('placeholder: install torch-neuronx from AWS')\n")
    out = run_with_path("""
        import nki
        from torchneuron.import_names import bind
        bind("torch_neuronx")
        from torch_neuronx import nki_op
        print(nki.__name__)
    """, REPO, tmp_path)
    assert out.strip() == "torchneuron.kernels.nki"


def test_placeholder_metadata_without_files_is_not_the_real_package(tmp_path):
    info = tmp_path / "nki-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nki\nVersion: 0.0.1\n")
    (info / "RECORD").write_text("")
    sys.path.insert(0, str(tmp_path))
    try:
        from torchneuron.import_names import real_package
        assert real_package("nki") is None
    finally:
        sys.path.remove(str(tmp_path))
