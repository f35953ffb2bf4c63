"""The shared crash-isolating worker pool of both batteries (torchneuron/compat/pool.py), driven
by a battery made for it (pool_battery.py): a worker that crashes or hangs is replaced, the case
it was running gets the battery's lost record, and the unit resumes or ends as the battery says."""

import os

import pytest

from torchneuron.compat import pool

import pool_battery  # noqa: E402 - found through PYTHONPATH, as the worker processes find it


@pytest.fixture(autouse=True)
def _battery_importable(monkeypatch):
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [here, *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setattr(pool, "STARTUP_RETRY_DELAY_S", 0)


def _run(units, battery, **kwargs) -> dict:
    done = {}

    def on_unit_done(unit, records, seconds):
        assert unit[0] not in done, "a unit finished twice"
        done[unit[0]] = records

    pool.run(units, battery, kwargs.pop("jobs", 1), kwargs.pop("case_timeout", 60), on_unit_done,
             **kwargs)
    return done


def test_a_crash_is_recorded_and_the_unit_resumes_in_a_fresh_worker():
    done = _run([("a", ["ok", "segv", "ok"]), ("b", ["ok"])], pool_battery.RESUMING)
    a = sorted(done["a"], key=lambda r: r["case"])
    assert [r["status"] for r in a] == ["pass", "crash", "pass"]
    assert a[1]["exit_code"] == -11
    assert a[0]["pid"] != a[2]["pid"]
    assert [r["status"] for r in done["b"]] == ["pass"]


def test_a_hang_is_a_timeout_and_the_unit_resumes():
    done = _run([("a", ["hang", "ok"])], pool_battery.RESUMING, case_timeout=3)
    assert [(r["case"], r["status"]) for r in done["a"]] == [(0, "timeout"), (1, "pass")]
    assert done["a"][0]["timeout_s"] == 3


def test_a_unit_that_keeps_crashing_is_abandoned():
    done = _run([("a", ["segv"] * 5)], pool_battery.RESUMING)
    statuses = [r["status"] for r in done["a"]]
    assert statuses == ["crash"] * pool.MAX_CRASHES_PER_UNIT + ["abandoned"]
    assert done["a"][-1] == {"case": pool.MAX_CRASHES_PER_UNIT, "status": "abandoned",
                             "crashes": pool.MAX_CRASHES_PER_UNIT}


def test_without_an_abandoned_record_a_unit_ends_at_its_first_lost_case():
    # The model battery's way: one case per unit, the next unit goes on in a fresh worker.
    done = _run([("a", ["segv", "ok"]), ("b", ["ok"])], pool_battery.ONE_CASE)
    assert [r["status"] for r in done["a"]] == ["crash"]
    assert [r["status"] for r in done["b"]] == ["pass"]


def test_a_worker_is_replaced_after_its_share_of_units():
    done = _run([(name, ["ok"]) for name in "abcd"], pool_battery.ONE_CASE, units_per_worker=2)
    pids = [done[name][0]["pid"] for name in "abcd"]
    assert pids[0] == pids[1] != pids[2] == pids[3]


def test_several_workers_run_units_at_the_same_time(tmp_path):
    # Each unit waits until both have begun: it passes only if the two run in two workers at once.
    meet = f"meet:{tmp_path}:2"
    done = _run([("a", [meet]), ("b", [meet]), ("c", ["ok"])], pool_battery.RESUMING, jobs=2,
                case_timeout=60)
    assert [r["status"] for name in "abc" for r in done[name]] == ["pass"] * 3
    assert done["a"][0]["pid"] != done["b"][0]["pid"]


def test_a_worker_that_cannot_start_stops_the_battery_with_its_log(monkeypatch):
    monkeypatch.setenv("POOL_BATTERY_BROKEN", "1")
    with pytest.raises(RuntimeError, match=f"failed to start {pool.STARTUP_ATTEMPTS} times"
                                           r"(.|\n)*this worker cannot start"):
        _run([("a", ["ok"])], pool_battery.RESUMING)
