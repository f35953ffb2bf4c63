"""The runtime seam's own C++ tests: the seam is built alone, with the C++ standard library only,
as the layer table in docs/how-it-works.md requires, and checked without PyTorch in the process:
its allocation, capacity, copies and clock (tests/runtime/seam_test.cpp), and its execution:
streams, markers, clocks, errors of queued work (tests/runtime/execution_test.cpp); and the
memory-protected runtime: windows, page-rounded blocks, the fault's message
(tests/runtime/protected_memory_test.cpp)."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEAM = ROOT / "csrc" / "runtime"


@pytest.mark.parametrize("test", ["seam_test.cpp", "execution_test.cpp",
                                  "protected_memory_test.cpp"])
def test_seam_cpp_checks_pass(test, tmp_path):
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.fail("no C++ compiler on PATH; the seam tests need one (the extension does too)")
    binary = tmp_path / test.removesuffix(".cpp")
    # -I csrc only: an include of anything but the standard library and the seam fails to build.
    build = subprocess.run(
        [compiler, "-std=c++20", "-O1", "-Wall", "-Werror", "-pthread", f"-I{ROOT / 'csrc'}",
         str(ROOT / "tests" / "runtime" / test), *map(str, sorted(SEAM.glob("*.cpp"))),
         "-o", str(binary)],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
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
