"""The crash battery's fast slice (issue 47: no op ends the process). `make compat-ops` runs every
OpInfo of PyTorch's databases on neuron, forward and backward, every sample, strided and in each
sparse layout an OpInfo samples, in worker processes; its report's `| process crashes | N |` row
must be 0. This slice runs the same machinery on the OpInfos that crashed before (sparse.mm's
reduce variant) and on sparse samples of every layout, and checks that a crash is reported as the
op and sample that caused it while the run goes on."""

import json
import os
import signal

import pytest

from torchneuron.compat.ops import cases, jobs, report

# OpInfos whose sparse samples or sparse autograd reach the kernels that crashed or could crash:
# sparse products and reductions, in every sparse layout the OpInfo samples.
SLICE_OPS = ["sparse.mm.reduce", "sparse.sampled_addmm", "to_sparse", "sum", "mul", "masked.amax"]
SLICE_DTYPES = ["float32"]


@pytest.fixture(scope="module")
def slice_results():
    units = cases.enumerate_units(cases.databases(), SLICE_OPS, SLICE_DTYPES)
    results = report.Results()
    jobs.run_units(units, jobs=2, variants=("forward", "backward"), case_timeout=120,
                   on_unit_done=results.add)
    return results


def test_slice_covers_every_sparse_layout_forward_and_backward(slice_results):
    layouts = {u.layout for u, _ in slice_results.units}
    assert layouts == set(cases.LAYOUTS)
    variants = {r["variant"] for _, r in slice_results.records()}
    assert variants == {"forward", "backward"}
    assert slice_results.totals()["cases"] > 150


def test_no_case_ends_its_worker(slice_results):
    t = slice_results.totals()
    lost = [(u.label, r["sample"], r["variant"], r.get("input"), r["message"])
            for u, r in slice_results.records() if r["status"] in ("crash", "timeout")]
    assert t["process_crashes"] == 0 and not lost, lost


def test_sparse_mm_reduce_backward_matches_cpu(slice_results):
    # The reduce variant's amax/amin samples, whose backward died with SIGSEGV: now each of its
    # cases computes the CPU's result or raises what the CPU raises.
    recs = [r for u, r in slice_results.records() if u.op == "sparse.mm.reduce"]
    backward = [r for r in recs if r["variant"] == "backward"]
    assert backward and all(r["status"] == "pass" for r in backward), backward
    assert all(r["status"] in ("pass", "cpu_error") for r in recs), recs


def test_a_crash_is_reported_as_its_op_and_sample_and_the_run_goes_on(tmp_path):
    # A worker killed by SIGSEGV in the middle of a sparse unit stands for an op that crashes:
    # the case becomes a "crash" record naming the op, the sample (index and what it holds) and
    # the variant; the unit resumes in a fresh worker, the next unit runs, the report counts it.
    dbs = cases.databases()
    units = cases.enumerate_units(dbs, ["sum"], ["float32"], ["sparse_csr", "strided"])
    assert len(units) >= 2
    killed = []

    def kill_at_case_5(unit, case, pid):
        if unit == units[0] and case == 5 and not killed:
            killed.append(pid)
            os.kill(pid, signal.SIGSEGV)

    results = report.Results()
    jobs.run_units(units, 1, ("forward", "backward"), 120, results.add, kill_at_case_5)
    assert killed
    crashes = results.crashes()
    assert len(crashes) == 1
    unit, rec = crashes[0]
    assert unit == units[0] and "exit code -11" in rec["message"]
    assert rec["sample"] == rec["case"] // len(cases.VARIANTS)
    # The sample is described from the unit's own samples, rebuilt in the parent.
    assert "float32[" in rec["input"] and "not described" not in rec["input"]
    assert {u for u, _ in results.units} == set(units)  # every unit still ran
    later = [r for u, r in results.records() if u == units[0] and r["case"] > rec["case"]]
    assert later and all(r["status"] != "crash" for r in later)

    meta = {"databases": ["op_db"], "dtypes": ["float32"], "torch": "x", "jobs": 1,
            "float64_policy": "warn", "duration_s": 1.0, "command": "test"}
    json_path, md_path = report.write(results, meta, str(tmp_path))
    text = open(md_path).read()
    assert "| process crashes | 1 |" in text
    assert f"| {units[0].label} | float32 | {rec['sample']} | {rec['variant']} |" in text
    assert json.load(open(json_path))["totals"]["process_crashes"] == 1


def test_a_run_without_crashes_says_none(slice_results, tmp_path):
    meta = {"databases": ["op_db"], "dtypes": ["float32"], "torch": "x", "jobs": 2,
            "float64_policy": "warn", "duration_s": 1.0, "command": "test"}
    _, md_path = report.write(slice_results, meta, str(tmp_path))
    text = open(md_path).read()
    assert "| process crashes | 0 |" in text
    assert "## Process crashes" in text and "None." in text


@pytest.mark.filterwarnings("ignore:Sparse (CSR|invariant|BSR|CSC)")
def test_sparse_results_are_measured_over_their_dense_values():
    # A sparse mismatch is reported with its largest error, not as a failure to compare
    # (randn_like in a compressed layout did that: BSR minus BSR is not an op PyTorch has).
    import torch

    from torchneuron.compat.judge import max_error

    a, b = torch.randn(4, 4), torch.randn(4, 4)
    expected = (a.double() - b.double()).abs().max().item()
    for convert in (lambda x: x.to_sparse(), lambda x: x.to_sparse_csr(),
                    lambda x: x.to_sparse_bsr((2, 2)), lambda x: x.to_sparse_bsc((2, 2))):
        assert max_error(convert(a), convert(b)) == pytest.approx(expected)
