"""The runtime seam's own C++ tests (tests/runtime/seam_test.cpp): the seam is built alone, with
the C++ standard library only, as DESIGN.md's layer table requires, and its allocation,
capacity, copies and clock are checked without PyTorch in the process."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEAM = ROOT / "csrc" / "runtime"


@pytest.fixture(scope="module")
def seam_binary(tmp_path_factory):
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.fail("no C++ compiler on PATH; the seam tests need one (the extension does too)")
    out = tmp_path_factory.mktemp("seam") / "seam_test"
    # -I csrc only: an include of anything but the standard library and the seam fails to build.
    subprocess.run(
        [compiler, "-std=c++20", "-O1", "-Wall", "-Werror", "-pthread", f"-I{ROOT / 'csrc'}",
         str(ROOT / "tests" / "runtime" / "seam_test.cpp"), str(SEAM / "NeuronRuntime.cpp"),
         "-o", str(out)],
        check=True, capture_output=True, text=True)
    return out


def test_seam_cpp_checks_pass(seam_binary):
    run = subprocess.run([str(seam_binary)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert ", 0 failed" in run.stdout


def test_seam_sources_include_only_the_standard_library():
    for path in sorted(SEAM.glob("*")):
        for line in path.read_text().splitlines():
            if line.startswith("#include"):
                assert "<" in line or line.strip() == '#include "NeuronRuntime.h"' or \
                    "runtime/" in line, f"{path.name}: {line}"
                assert "torch" not in line and "c10" not in line and "ATen" not in line, \
                    f"{path.name} reaches above the seam: {line}"
