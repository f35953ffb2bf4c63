"""Hangs and desyncs over 3 processes name the rank that caused them, on every rank, and
PyTorch's flight recorder, completed by the backend, is dumped where PyTorch dumps it and read
by PyTorch's own analyzer (`python -m torch.distributed.flight_recorder.fr_trace`).

One world of 3 ranks for the module (starting processes costs seconds); each scenario makes its
own group with a short timeout, so a scenario that breaks its group leaves the next one a fresh
one. The killed rank comes last: it ends the world."""

import datetime
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
import torch.distributed as dist
from dist_world import World

TIMEOUT_S = 3.0


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return tmp_path_factory.mktemp("fr")


@pytest.fixture(scope="module")
def world3(dumps):
    # The workers read the variable once, at their first neuron call (runtime/config.py).
    old = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    os.environ["TORCH_FR_DUMP_TEMP_FILE"] = str(dumps / "trace_")
    try:
        with World(3, pg_timeout_s=60) as w:
            yield w
    finally:
        if old is None:
            del os.environ["TORCH_FR_DUMP_TEMP_FILE"]
        else:
            os.environ["TORCH_FR_DUMP_TEMP_FILE"] = old


def dev():
    return torch.device("neuron", torch.neuron.current_device())


def fresh_group(timeout_s=TIMEOUT_S):
    """A group of all ranks whose first collective already ran (its agreement channel is made)."""
    group = dist.new_group([0, 1, 2], timeout=datetime.timedelta(seconds=timeout_s))
    dist.all_reduce(torch.ones(2, device=dev()), group=group)
    return group


def error_of(fn):
    start = time.monotonic()
    try:
        fn()
    except RuntimeError as e:
        return str(e), time.monotonic() - start
    return None, time.monotonic() - start


def fr_trace(folder) -> str:
    done = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace",
                           str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def assert_culprit(errors, culprit, collective):
    """Every rank's error names the culprit and nothing else as culprit, and the collective."""
    for rank, (error, elapsed) in enumerate(errors):
        assert error is not None, f"rank {rank} raised nothing"
        verdict = error.split("likely culprit: ")[1].split(".")[0]
        assert verdict.startswith(f"rank {culprit}") and verdict.count("rank ") == 1, error
        assert collective in error, error
        assert elapsed < TIMEOUT_S + 5, (rank, elapsed)


# ------------------------------------------------------------------ the recorder, on demand

def on_demand_body(folder):
    group = fresh_group()
    t = torch.arange(4.0, device=dev())
    dist.all_reduce(t, group=group)
    dist.all_gather_into_tensor(torch.empty(12, device=dev()), t, group=group)
    raw = torch._C._distributed_c10d._dump_fr_trace()  # PyTorch's entry point
    with open(os.path.join(folder, f"trace_{dist.get_rank()}"), "wb") as f:
        f.write(raw)
    dump = pickle.loads(raw)
    mine = [e for e in dump["entries"] if e["process_group"][0] == group.group_name]
    return group.group_name, dump["pg_config"], [(e["profiling_name"], e["state"]) for e in mine]


def test_on_demand_dump_names_groups_and_states(world3, tmp_path):
    results = world3.run(on_demand_body, str(tmp_path), timeout=60)
    for name, pg_config, entries in results:
        assert "" not in pg_config  # gloo's record of the group before it had a name
        assert pg_config[name]["ranks"] == "[0, 1, 2]"
        assert pg_config["0"]["desc"] == "default_pg" and pg_config["0"]["ranks"] == "[0, 1, 2]"
        assert ("gloo:all_reduce", "completed") in entries
        assert ("gloo:all_gather", "completed") in entries
        assert {state for _, state in entries} == {"completed"}
    report = fr_trace(tmp_path)
    assert "has errors" not in report and "Not all ranks joining" not in report, report


# ------------------------------------------------------------------ desyncs found at the call

def skipped_body():
    group = fresh_group()
    t = torch.ones(4, device=dev())

    def program():
        for i in range(3):
            if not (dist.get_rank() == 1 and i == 1):  # rank 1 skips the second all_reduce
                dist.all_reduce(t, group=group)
        dist.barrier(group=group)

    return error_of(program)


def test_skipped_collective_names_the_rank_that_skipped(world3, dumps):
    errors = world3.run(skipped_body, timeout=60)
    # Rank 1's barrier meets the others' third all_reduce.
    assert_culprit(errors, 1, "c10d::")
    assert "rank 0 called c10d::allreduce_, rank 1 called c10d::barrier" in errors[0][0]
    assert "rank 1 called c10d::barrier, rank 0 called c10d::allreduce_" in errors[1][0]
    for rank, (error, _) in enumerate(errors):
        assert str(dumps / f"trace_{rank}") in error
    report = fr_trace(dumps)
    assert "Expected collective type: 'all_reduce' does not match found collective type: " \
           "'barrier'" in report or "Expected collective type: 'barrier' does not match " \
           "found collective type: 'all_reduce'" in report, report


def swapped_body():
    group = fresh_group()
    t = torch.ones(4, device=dev())

    def program():
        if dist.get_rank() == 1:
            dist.broadcast(t, 0, group=group)
            dist.all_reduce(t, group=group)
        else:
            dist.all_reduce(t, group=group)
            dist.broadcast(t, 0, group=group)

    return error_of(program)


def test_swapped_order_names_the_odd_rank(world3):
    errors = world3.run(swapped_body, timeout=60)
    assert_culprit(errors, 1, "c10d::")
    assert "rank 0 called c10d::allreduce_, rank 1 called c10d::broadcast_" in errors[0][0]


def size_body():
    group = fresh_group()
    t = torch.ones(8 if dist.get_rank() == 1 else 4, device=dev())
    error = error_of(lambda: dist.all_reduce(t, group=group))
    after = torch.ones(3, device=dev())
    dist.all_reduce(after, group=group)  # nothing moved: the group is still usable
    return error, after.cpu()


def test_different_size_names_the_odd_rank(world3):
    results = world3.run(size_body, timeout=60)
    assert_culprit([error for error, _ in results], 1, "c10d::allreduce_")
    for _, after in results:
        torch.testing.assert_close(after, torch.full((3,), 3.0))


# ------------------------------------------------------------------ hangs found by a timeout

def stuck_body():
    group = fresh_group()
    if dist.get_rank() == 1:
        time.sleep(TIMEOUT_S + 2)  # stuck in its own code while the others wait at the barrier
    return error_of(lambda: dist.barrier(group=group))


def test_rank_stuck_before_a_barrier_is_named_everywhere(world3, dumps):
    errors = world3.run(stuck_body, timeout=60)
    assert_culprit(errors, 1, "c10d::barrier")
    for rank in (0, 2):
        error = errors[rank][0]
        assert f"Timed out waiting {int(TIMEOUT_S * 1000)}ms" in error
        assert "it has not reached this collective" in error
        # every rank's dump, rank 1's included: its watchdog wrote it while it slept
        for r in range(3):
            assert f"rank {r}: {dumps / f'trace_{r}'}" in error, error
    # rank 1 arrives after the others gave up: it raises at once, with their verdict
    assert "after another rank gave up on the group" in errors[1][0]
    assert errors[1][1] < 1.0


# ------------------------------------------------------------------ dumps on SIGUSR2

def signal_body(folder):
    group = fresh_group(timeout_s=30)
    path = os.path.join(folder, f"trace_{dist.get_rank()}")
    if dist.get_rank() == 1:
        time.sleep(3)  # the others block in the all_reduce meanwhile
    elif dist.get_rank() == 0:
        if os.path.exists(path):
            os.remove(path)
        threading.Timer(1.0, os.kill, args=(os.getpid(), signal.SIGUSR2)).start()
    dist.all_reduce(torch.ones(4, device=dev()), group=group)
    if dist.get_rank() != 0:
        return None
    deadline = time.monotonic() + 30  # a first dump with stack traces takes seconds
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    with open(path, "rb") as f:
        dump = pickle.load(f)
    return group.group_name, [(e["profiling_name"], e["state"], e["process_group"][0],
                               bool(e["frames"])) for e in dump["entries"]]


def test_sigusr2_dumps_while_blocked_in_a_collective(world3, dumps):
    name, entries = world3.run(signal_body, str(dumps), timeout=60)[0]
    # Written while the main thread waited: the all_reduce is there, not yet started, with
    # the stack of the thread that waits in it.
    assert ("gloo:all_reduce", "scheduled", name, True) in entries


# ------------------------------------------------------------------ a killed rank (ends the world)

def killed_body():
    group = fresh_group()
    if dist.get_rank() == 1:
        os._exit(7)
    return error_of(lambda: dist.all_reduce(torch.ones(4, device=dev()), group=group))


def test_killed_rank_is_named(world3):
    results = world3.run_each(killed_body, timeout=60)
    assert results[1] == ("died", 7)
    errors = [value for status, value in (results[0], results[2])]
    assert all(status == "ok" for status, _ in (results[0], results[2])), results
    for error, elapsed in errors:
        verdict = error.split("likely culprit: ")[1]
        assert verdict.startswith("rank 1 (its process is gone"), error
        assert "rank 1: none (its process is gone)" in error
        assert elapsed < TIMEOUT_S + 5


# ------------------------------------------------------------------ pieces, without processes

def test_the_minority_is_the_culprit_and_an_even_split_names_none():
    from torchneuron.distributed.forensics import minority

    assert minority([("allreduce",), ("barrier",), ("allreduce",)]) == [1]
    assert minority([("a",), ("a",), ("b",), ("c",)]) == [2, 3]
    assert minority([("a",), ("b",)]) is None  # 2 ranks that disagree: either may be wrong
    assert minority([("a",), ("a",), ("b",), ("b",)]) is None


def test_a_bad_recorder_size_is_refused():
    from torchneuron.runtime import config

    with pytest.raises(config.ConfigError, match="TORCH_FR_BUFFER_SIZE='lots' is not valid"):
        config.load({"TORCH_FR_BUFFER_SIZE": "lots"})
    loaded = config.load({"TORCH_FR_BUFFER_SIZE": "0", "TORCH_FR_DUMP_TEMP_FILE": "/x/t_"})
    assert (loaded.fr_buffer_size, loaded.fr_dump_prefix) == (0, "/x/t_")
    assert config.load({}).fr_dump_prefix == "/tmp/nccl_trace_rank_"  # PyTorch's default


def test_the_signal_handler_leaves_a_programs_own_in_place(python):
    done = python("import signal, torch\n"
                  "signal.signal(signal.SIGUSR2, lambda *a: None)\n"
                  "print(torch.ops.torchneuron.install_dump_signal(int(signal.SIGUSR2)))")
    assert done.stdout.strip() == "-1", done.stderr
