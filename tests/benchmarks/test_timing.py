"""benchmarks/timing.py: what a timed batch holds, and the CPU baseline's allocator setting. No
timing is asserted."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import weakref

from test_adaptive_eager import BENCHMARKS

sys.path.insert(0, BENCHMARKS)
try:
    import timing
finally:
    sys.path.remove(BENCHMARKS)


class Result:
    """A return value whose liveness a weak reference can watch."""


def alive_at_finish(keep_results: bool, number: int = 4) -> tuple[list[bool], list[bool]]:
    refs: list[weakref.ref] = []
    seen: list[bool] = []

    def fn():
        result = Result()
        refs.append(weakref.ref(result))
        return result

    def finish():  # runs before the clock is read
        seen[:] = [ref() is not None for ref in refs]

    timing.seconds_per_call(fn, number, finish=finish, keep_results=keep_results)
    return seen, [ref() is not None for ref in refs]


def test_kept_results_live_until_the_batch_is_timed_then_are_released():
    at_finish, after = alive_at_finish(keep_results=True)
    assert at_finish == [True] * 4  # a deferring mode must compute every one of them
    assert after == [False] * 4


def test_dropped_results_are_released_at_once():
    at_finish, after = alive_at_finish(keep_results=False)
    assert at_finish == [False] * 4
    assert after == [False] * 4


# A 64 MiB pointwise op's minor page faults per call on the CPU, in a process of its own (glibc
# reads its settings at process start); argv[1] says whether the process calls keep_freed_memory.
FAULTS_PER_CALL = """
import resource, sys
sys.path.insert(0, sys.argv[2])
import torch
import timing
if sys.argv[1] == "keep":
    timing.keep_freed_memory()  # starts this process again with glibc's settings
x = torch.ones(16 << 20)

def faults_of_a_call():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    y = x * 2
    del y
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

print([faults_of_a_call() for _ in range(20)])
"""


def faults_per_call(keep: bool) -> list[int]:
    env = {k: v for k, v in os.environ.items() if k not in timing.KEEP_FREED_MEMORY}
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    done = subprocess.run([sys.executable, "-c", FAULTS_PER_CALL, "keep" if keep else "default",
                           BENCHMARKS], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def test_keep_freed_memory_spares_the_cpu_its_page_faults_on_large_tensors():
    tensor_pages = (64 << 20) // 4096
    assert min(faults_per_call(keep=False)) >= tensor_pages  # glibc's default: mmap every time
    kept = faults_per_call(keep=True)
    # Once warm, the heap's memory is reused: most calls fault no page. Not every one: on a busy
    # machine an allocation in between may take the freed block once, and the next call then
    # faults the tensor's pages anew (CI saw one such call of the last 10).
    warm = sorted(kept[-10:])
    assert warm[5] < tensor_pages // 16 and warm[7] < tensor_pages // 16, kept
