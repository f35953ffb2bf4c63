"""A fixed slice of the op conformance battery (torchneuron compat ops) in the default test run:
every case that passes in the committed baseline (ops_baseline.json) must still pass. The whole
battery runs with `make compat-ops`; regenerate the baseline after a fix with

    torchneuron compat ops --ops $(python -c "import json;print(*json.load(open(
        'tests/compat/ops_baseline.json'))['ops'])") --write-baseline tests/compat/ops_baseline.json
"""

import json
import os

import pytest

from torchneuron.compat.ops import cases, jobs, report

BASELINE = os.path.join(os.path.dirname(__file__), "ops_baseline.json")


def _baseline():
    with open(BASELINE) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def slice_results():
    base = _baseline()
    dbs = cases.databases()
    # Baselines written before sparse layouts were sampled cover strided samples only.
    units = cases.enumerate_units(dbs, base["ops"], base["dtypes"],
                                  base.get("layouts") or ["strided"])
    results = report.Results()
    jobs.run_units(units, jobs=2, variants=tuple(base["variants"]), case_timeout=120,
                   on_unit_done=results.add)
    return results


@pytest.mark.slow
def test_slice_covers_every_family(slice_results):
    # The slice is meant to be broad: a baseline that shrank to nothing would test nothing.
    categories = {u.category for u, _ in slice_results.units}
    assert {"unary", "binary", "reduction", "nn.functional", "linalg", "spectral", "foreach",
            "python_ref_db", "other"} <= categories
    assert len(_baseline()["passing"]) > 2000


@pytest.mark.slow
def test_no_regression_against_baseline(slice_results):
    statuses = slice_results.statuses()
    regressions = [f"{k}: {statuses.get(k, 'not run')}" for k in _baseline()["passing"]
                   if statuses.get(k) != "pass"]
    assert not regressions, f"{len(regressions)} baseline cases no longer pass:\n" + "\n".join(
        regressions[:40])


@pytest.mark.slow
def test_report_renders(slice_results, tmp_path):
    meta = {"databases": ["op_db"], "dtypes": ["float32"], "torch": "x", "jobs": 2,
            "float64_policy": "error", "duration_s": 1.0, "command": "test"}
    json_path, md_path = report.write(slice_results, meta, str(tmp_path))
    text = open(md_path).read()
    assert "pass rate" in text and "## Pass rate by category" in text
    assert json.load(open(json_path))["totals"]["cases"] == slice_results.totals()["cases"]


def test_a_crashing_worker_is_replaced_and_the_unit_resumes():
    # A worker killed by SIGSEGV in the middle of a unit: that case is recorded as a crash, a
    # fresh worker runs the rest, and every other case still has its record.
    import signal

    from torchneuron.compat.ops.runner import UnitRunner

    dbs = cases.databases()
    units = cases.enumerate_units(dbs, ["nn.functional.relu"], ["float32"])
    expected = []
    UnitRunner(dbs[units[0].db][units[0].index], units[0]).run(
        0, lambda case: None, lambda case, rec: expected.append(case) if rec else None)
    assert len(expected) > 6
    killed = []

    def kill_at_case_5(unit, case, pid):
        if case == 5 and not killed:
            killed.append(pid)
            os.kill(pid, signal.SIGSEGV)

    crashed = report.Results()
    jobs.run_units(units, 1, cases.VARIANTS, 120, crashed.add, kill_at_case_5)
    records = crashed.units[0][1]
    crashes = [r for r in records if r["status"] == "crash"]
    assert killed and len(crashes) == 1 and "exit code -11" in crashes[0]["message"]
    # The crashed case replaces its own record, or (killed between cases) the next one's.
    assert {r["case"] for r in records} == set(expected)
