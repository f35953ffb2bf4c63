"""benchmarks/time_model.py: a run of its kernel class (no tracing, seconds) prints each case with
its prediction, published value, ratio and source, then the closing lines the issue asks for;
every case names a public source. The figures themselves are deterministic and their error is
reported, not asserted (a benchmark, not a timed test)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
# A script's folder comes first on its sys.path: the checkout's torchneuron must come next.
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
BENCHMARKS = str(ROOT / "benchmarks")
sys.path.insert(0, BENCHMARKS)
try:
    import time_model
finally:
    sys.path.remove(BENCHMARKS)


def test_every_case_names_a_public_source_and_a_published_value():
    cases = time_model.cases()
    assert len(cases) >= 30
    for case in cases:
        assert case.source.startswith("https://") and case.published > 0, case.name
    assert len({c.name for c in cases}) == len(cases)


def test_a_class_run_prints_cases_and_the_closing_lines():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "time_model.py"),
                           "--only", "NKI"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = [l for l in lines if l.startswith("NKI mamba_v3")]
    assert len(rows) == 5 and all(re.search(r"\d\.\d\dx  https://", r) for r in rows)
    assert re.fullmatch(r"median \|error\|: \d+%", lines[-2])
    assert re.fullmatch(r"worst ratio: \d+\.\d\dx", lines[-1])


def test_an_unknown_class_is_refused():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "time_model.py"),
                           "--only", "tpu"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env=ENV)
    assert done.returncode != 0 and "no case's class contains 'tpu'" in done.stderr
