"""The report's parts on known inputs, in process: the ranking of changes, the comparison of two
reports (regressions first), and the terminal lines of a run that raised or never used neuron."""

import copy

from torchneuron.readiness import report


def _summary(fallback_calls=0, syncs=0, recompiles=0, fits=True, dynamic=()):
    return {
        "schema": 1,
        "host_fallbacks": {"calls": fallback_calls, "bytes_to_host": 0, "bytes_from_host": 0,
                           "cpu_seconds": 0.0,
                           "ops": [{"op": "aten::mul.Tensor", "location": "t.py:3",
                                    "reason": "float64", "calls": fallback_calls,
                                    "bytes_to_host": 800, "bytes_from_host": 800,
                                    "cpu_seconds": 0.0}] if fallback_calls else []},
        "syncs": {"count": syncs, "by_cause": {"item": syncs} if syncs else {},
                  "sites": [{"op": "aten::_local_scalar_dense", "location": "t.py:4",
                             "cause": "item", "count": syncs, "bytes_to_host": 4}]
                  if syncs else []},
        "signatures": {"count": 5, "recompiles": recompiles,
                       "sites": [{"op": "aten::mm", "location": "t.py:5", "signatures": 5,
                                  "recompiles": recompiles, "first_signature": ""}]},
        "dynamo": {"recompiles": 0, "reasons": [], "dynamic_shapes": list(dynamic)},
        "recompiles": recompiles,
        "memory": {"peak_bytes": 10, "hbm_bytes": 100 if fits else 5, "fits": fits}}


def test_changes_put_what_fails_first_then_stalls_by_cost():
    summary = _summary(fallback_calls=2, syncs=50, recompiles=0, fits=False,
                       dynamic=[{"kind": "mark_dynamic", "location": "t.py:9"}])
    found = report.changes(summary)
    assert [c["kind"] for c in found] == ["dynamic shapes", "memory", "sync", "host fallback"]
    assert found[0]["location"] == "t.py:9" and found[0]["cost_seconds"] is None
    assert found[2]["cost_seconds"] > found[3]["cost_seconds"]  # 50 syncs outweigh 2 calls


def test_changes_count_recompiles_after_warm_up_only():
    steady = _summary(recompiles=4)
    assert report.changes(_summary(recompiles=4), steady) == []
    later = report.changes(_summary(recompiles=7), steady)
    assert [(c["kind"], c["location"]) for c in later] == [("recompile", "t.py:5")]
    assert "3 recompiles" in later[0]["what"]
    assert len(report.changes(_summary(fallback_calls=1, syncs=1, recompiles=9,
                                       dynamic=[{"kind": "dynamic=True", "location": "a:1"}]
                                       * 6), steady)) == 5


def _report(summary, graph_s=1e-3):
    machines = {m: {"step_seconds_graph": graph_s, "step_seconds_eager": 2 * graph_s,
                    "mfu_graph": 0.5, "mfu_eager": 0.25, "hbm_bytes": 100, "fits": True,
                    "stall_seconds": 0.0} for m in report.TARGETS}
    return {"schema": 1, "script": "t.py", "argv": [], "status": "ok", "exit_code": 0,
            "error": None, "touched_neuron": True, "wall_seconds": 1.0,
            "steps": {"kind": "optimizer", "count": 2, "rows": []}, "traced_step": 2,
            "accounting": summary, "estimate": {"dtype": "float32", "flops": 10, "ops": 3,
                                                "machines": machines},
            "ops": [], "changes": report.changes(summary)}


def test_compare_lists_regressions_first():
    old = _report(_summary(syncs=1))
    new = _report(_summary(syncs=3, fallback_calls=0), graph_s=0.5e-3)
    rows = report.compare(old, new)
    assert [r["figure"] for r in rows if r["regression"]] == ["host syncs"]
    assert rows[0]["figure"] == "host syncs" and (rows[0]["old"], rows[0]["new"]) == (1, 3)
    text = report.format_compare(rows)
    assert text.splitlines()[0] == "compared with the old report: 1 regression(s)"
    assert "REGRESSION host syncs: 1 -> 3" in text
    assert report.compare(old, copy.deepcopy(old)) and not any(
        r["regression"] for r in report.compare(old, copy.deepcopy(old)))


def test_format_report_of_a_failed_and_an_idle_run():
    failed = _report(_summary(syncs=1))
    failed.update(status="raised", exit_code=1,
                  error={"type": "ValueError", "message": "bad", "location": "t.py:7",
                         "traceback": ""})
    text = report.format_report(failed)
    assert "t.py: raised (exit 1)" in text and "raised ValueError: bad (at t.py:7)" in text
    assert "trn2: 1.000 ms as one compiled graph (MFU 50.0%)" in text
    idle = _report(_summary())
    idle["touched_neuron"] = False
    assert "never used the neuron device" in report.format_report(idle)
    assert "trn2" not in report.format_report(idle)


def test_merge_keeps_the_lowest_rank_and_the_worst_status():
    ok = dict(_report(_summary(syncs=1)), rank=1)
    failed = dict(_report(_summary(syncs=2)), rank=0, status="raised", exit_code=1,
                  error={"type": "E", "message": "m", "location": "t.py:1", "traceback": ""})
    ok = dict(ok, rank=1)
    merged = report.merge([ok, failed])
    assert merged["status"] == "raised" and merged["exit_code"] == 1 and merged["rank"] is None
    assert [(r["rank"], r["syncs"]) for r in merged["ranks"]] == [(0, 2), (1, 1)]
    assert "rank 1: ok, 2 steps, 0 host fallback calls, 1 syncs" in report.format_report(merged)
