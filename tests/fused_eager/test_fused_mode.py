"""Fused eager end to end (NEURON_EAGER_MODE=fused): the queue holds consecutive pointwise ops,
hot chains are compiled on the compile thread and then run as one generated kernel that writes
only the results someone can read. Every case runs in a process of its own mode
(tests/fused_eager/fused_mode_cases.py), compares each call's results with the CPU's and reports what
was held and fused."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_python

FUSED = {"NEURON_EAGER_MODE": "fused", "NEURON_FUSION_HOT": "2"}
CASES = """
import runpy, sys
sys.argv = ["fused_mode_cases", *sys.argv[1:]]
runpy.run_module("tests.fused_eager.fused_mode_cases", run_name="__main__")
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    env = dict(FUSED, TORCHINDUCTOR_CACHE_DIR=str(tmp_path_factory.mktemp("inductor")))
    out = run_python(CASES, env=env, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


CASE_NAMES = ["chain", "chain_no_sync_between_calls", "kept_intermediate", "in_place_on_inputs",
              "in_place_on_a_result", "out_arguments", "reductions", "varying_floats",
              "runtime_floats", "interleaved_chains", "shared_inputs", "many_open_chains",
              "per_parameter_updates",
              "foreach_optimizer", "broken_by_item",
              "through_a_view",
              "mixed_dtypes", "training", "two_threads", "two_streams", "deterministic",
              "error_at_the_call", "profiled", "held_memory_is_bounded",
              "held_then_compiled"]


@pytest.mark.parametrize("case", CASE_NAMES)
def test_results_equal_the_cpu(report, case):
    assert report[case]["ok"], report[case].get("error")


# Cases whose chains become hot within the run: each ran fused at least once.
@pytest.mark.parametrize("case", ["chain", "kept_intermediate", "in_place_on_inputs",
                                  "in_place_on_a_result", "out_arguments", "reductions",
                                  "broken_by_item", "runtime_floats", "interleaved_chains",
                                  "per_parameter_updates", "foreach_optimizer",
                                  "mixed_dtypes", "training"])
def test_hot_chains_run_fused(report, case):
    stats = report[case]["stats"]
    assert stats["requested"] >= 1 and stats["ready"] == stats["requested"], stats
    assert stats["chains_fused"] >= 1 and stats["ops_fused"] >= 2 * stats["chains_fused"], stats


def test_a_compiled_chain_is_found_again_without_compiling(report):
    # The same chain in later calls (and without a synchronization in between) is a hit.
    stats = report["chain_no_sync_between_calls"]["stats"]
    assert stats["requested"] == 0 and stats["chains_fused"] == stats["chains"] == 8, stats


def test_intermediates_nobody_holds_are_not_written(report):
    # chain_of_pointwise: 6 ops, 5 intermediates dropped by Python; only the result is written.
    stats = report["chain_no_sync_between_calls"]["stats"]
    assert stats["results_skipped"] == 5 * stats["chains_fused"], stats
    # kept_intermediate holds `a`: of its 5 ops' results two are returned, three skipped.
    stats = report["kept_intermediate"]["stats"]
    assert stats["results_skipped"] == 3 * stats["chains_fused"], stats


def test_compiled_in_floats_that_keep_changing_stop_being_compiled(report):
    # A clamp bound is compiled in. 12 values per call, 5 calls: 4 values (csrc/fused_eager/
    # kFloatVariants) are signatures of their own, hot and compiled; the 8 others run unfused
    # in every call. (The very first chain is not formed: a signature's first call runs at the
    # call, where the queue checks its meta function against the CPU kernel.)
    from tests.fused_eager.fused_mode_cases import CALLS, VARYING_VALUES

    stats = report["varying_floats"]["stats"]
    # (A chain cut short, by an op that ran inline on an idle device or a hand-over the compile
    # thread's work caused, is one signature more, and one chain fewer that varies.)
    assert 4 <= stats["signatures"] <= 8 and stats["requested"] == 4, stats
    expected = (VARYING_VALUES - 4) * CALLS
    assert expected - 4 <= stats["chains_varying"] <= expected, stats
    assert stats["chains_fused"] >= 4, stats


def test_floats_read_at_run_time_keep_one_signature_per_chain(report):
    # AdamW's update with a new step size, bias correction, rate and lerp weight at every step:
    # one chain per step (lerp_ through add_), one signature whatever the values, compiled once,
    # then fused at every step.
    from tests.fused_eager.fused_mode_cases import CALLS, RUNTIME_STEPS

    stats = report["runtime_floats"]["stats"]
    # One signature; a chain cut short by an op that ran inline on an idle device is one more.
    # Compiled-in floats would make a signature per value up to the variants limit (4 per
    # chain) and then vary: chains_varying tells.
    assert 1 <= stats["signatures"] <= 4 and stats["requested"] <= stats["signatures"], stats
    assert stats["chains_varying"] == 0, stats
    # A few ops may run inline on an idle device instead, so the count varies by one or two;
    # with the floats compiled in, at most 4 values per chain would ever run fused.
    assert stats["chains_fused"] >= max(RUNTIME_STEPS * CALLS // 2, stats["chains"] * 3 // 4), \
        stats


def test_a_parameters_update_is_one_chain_though_its_ops_are_interleaved(report):
    # AdamW's update of one parameter is 8 ops (mul_, lerp_, mul_, addcmul_, sqrt, div, add_,
    # addcdiv_): its first three read nothing the others computed, and the foreach path issues
    # each op for every parameter before the next op. Each parameter still makes one chain of
    # all 8 (per step in the single-tensor loop, which synchronizes after each step; over all 3
    # steps in the foreach case, which does not), where chains that only followed the data
    # left the first three as single ops.
    from tests.fused_eager.fused_mode_cases import UPDATE_STEPS

    stats = report["per_parameter_updates"]["stats"]
    assert stats["chains_fused"] >= 3 and stats["ops_fused"] == 8 * stats["chains_fused"], stats
    stats = report["foreach_optimizer"]["stats"]
    assert stats["chains_fused"] >= 3, stats
    assert stats["ops_fused"] == 8 * UPDATE_STEPS * stats["chains_fused"], stats


def test_chains_that_only_read_the_same_tensors_stay_apart(report):
    # 4 calls of the 6-op chain on the same x and y per run: each fused chain is one call's.
    stats = report["shared_inputs"]["stats"]
    assert stats["chains_fused"] >= 4 and stats["ops_fused"] == 6 * stats["chains_fused"], stats
    assert stats["signatures"] <= 2, stats


def test_deterministic_algorithms_turn_fusion_off(report):
    assert report["deterministic"]["stats"]["ops_held"] == 0, report["deterministic"]


def test_nothing_failed_to_compile(report):
    assert report["failures"] == []


@pytest.mark.slow
def test_a_second_process_starts_warm_from_the_disk_cache(tmp_path):
    # Same chains, same Inductor cache directory: the second process compiles nothing anew.
    env = dict(FUSED, TORCHINDUCTOR_CACHE_DIR=str(tmp_path))
    reports = []
    for _ in range(2):
        out = run_python(CASES, env=env, timeout=600, args=("chain",))
        assert out.returncode == 0, out.stderr[-4000:]
        reports.append(json.loads(out.stdout.strip().splitlines()[-1])["chain"])
    first, second = (r["stats"] for r in reports)
    assert all(r["ok"] for r in reports), reports
    assert first["fxgraph_cache_miss"] == first["compiled"] >= 1, first
    assert second["fxgraph_cache_hit"] == second["compiled"] == first["compiled"], second
    assert second["fxgraph_cache_miss"] == 0 and second["chains_fused"] >= 1, second
