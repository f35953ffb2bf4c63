"""The compile policy: a chain compiles once hot, on a background thread; lookup returns None
until its kernel is ready; failures and deterministic mode leave chains unfused."""

from __future__ import annotations

import threading

import pytest
import torch

from torchneuron import fused_eager
from torchneuron.fused_eager import ChainCache, CompiledChain, compile_chain

from . import chains


class RecordingCompile:
    """Stands in for Inductor where only the policy is under test: compiles nothing, records the
    thread it ran on, and can be held until the test lets it go."""

    def __init__(self, error: Exception | None = None):
        self.calls, self.threads, self.error = [], [], error
        self.release = threading.Event()
        self.release.set()

    def __call__(self, chain, threads, device):
        self.calls.append((chain, threads, device))
        self.threads.append(threading.current_thread())
        self.release.wait(30)
        if self.error is not None:
            raise self.error
        return CompiledChain(chain, lambda tensors: None, threads, 0.0, {}, device)


def test_a_chain_compiles_once_hot_and_off_the_callers_thread():
    compile = RecordingCompile()
    compile.release.clear()
    cache = ChainCache(hot=3, compile=compile)
    chain, _ = chains.arithmetic()
    assert cache.lookup(chain) is None and cache.lookup(chain) is None
    assert compile.calls == []  # seen twice: cold
    assert cache.lookup(chain) is None  # the third sighting queues the compile ...
    assert cache.lookup(chain) is None  # ... which is still running: the caller goes on
    assert cache.stats()["pending"] == 1
    compile.release.set()
    assert cache.wait(timeout=30)
    ready = cache.lookup(chain)
    assert isinstance(ready, CompiledChain) and ready.chain is chain
    assert len(compile.calls) == 1 and compile.calls[0][1] == torch.get_num_threads()
    assert compile.threads[0] is not threading.current_thread()
    stats = cache.stats()
    assert (stats["lookups"], stats["chains_seen"], stats["ready"], stats["pending"]) == (5, 1,
                                                                                       1, 0)


def test_each_signature_counts_on_its_own():
    compile = RecordingCompile()
    cache = ChainCache(hot=2, compile=compile)
    a, _ = chains.arithmetic()
    b, _ = chains.mean_end()
    for chain in (a, b, a):
        cache.lookup(chain)
    assert cache.wait(timeout=30)
    assert [c for c, _, _ in compile.calls] == [a]
    assert cache.lookup(b) is None and cache.wait(timeout=30)
    assert cache.lookup(b) is not None


def test_a_chain_that_fails_to_compile_stays_unfused_with_one_warning():
    compile = RecordingCompile(error=RuntimeError("no C++ compiler"))
    cache = ChainCache(hot=1, compile=compile)
    chain, _ = chains.arithmetic()
    assert cache.lookup(chain) is None and cache.wait(timeout=30)
    with pytest.warns(RuntimeWarning, match=r"\['aten.mul.Tensor', 'aten.add.Tensor', "
                                             r"'aten.sub.Tensor', 'aten.mul.Tensor'\] did not "
                                             r"compile for cpu and runs unfused: "
                                             r"RuntimeError: no C\+\+"):
        assert cache.lookup(chain) is None
    for _ in range(3):
        assert cache.lookup(chain) is None
    assert len(compile.calls) == 1 and cache.stats()["failed"] == 1


def test_deterministic_algorithms_turn_lookups_off():
    compile = RecordingCompile()
    cache = ChainCache(hot=1, compile=compile)
    chain, _ = chains.arithmetic()
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert cache.lookup(chain) is None
        assert compile.calls == [] and cache.stats()["chains_seen"] == 0
    finally:
        torch.use_deterministic_algorithms(was)
    cache.lookup(chain)
    assert cache.wait(timeout=30) and cache.lookup(chain) is not None
    torch.use_deterministic_algorithms(True)
    try:
        assert cache.lookup(chain) is None  # compiled, but not used
    finally:
        torch.use_deterministic_algorithms(was)


def test_hot_must_be_at_least_one():
    with pytest.raises(ValueError, match="hot must be at least 1, not 0"):
        ChainCache(hot=0)


def test_wait_times_out_while_a_compile_is_held():
    compile = RecordingCompile()
    compile.release.clear()
    cache = ChainCache(hot=1, compile=compile)
    cache.lookup(chains.arithmetic()[0])
    assert cache.wait(timeout=0.05) is False
    compile.release.set()
    assert cache.wait(timeout=30)


def test_real_compile_in_the_background_then_lookup_returns_a_working_kernel(compiled):
    compiled["in_place"]  # on the disk cache by now, so the background compile is quick
    cache = ChainCache(hot=2)
    chain, inputs = chains.in_place()
    assert cache.lookup(chain) is None and cache.lookup(chain) is None
    assert cache.wait(timeout=120)
    kernel = cache.lookup(chain)
    assert kernel is not None
    x, y, _ = inputs
    expected = x * y + 1.0
    kernel(inputs, [])
    torch.testing.assert_close(x, expected)
    stats = cache.stats()
    assert stats["ready"] == 1 and stats["fxgraph_cache_hit"] == 1
    assert stats["cache_dir"].endswith("fxgraph")


def test_the_process_cache_takes_its_hotness_from_the_configuration(monkeypatch):
    from torchneuron.fused_eager import policy
    from torchneuron.runtime import config

    monkeypatch.setattr(policy, "_default", None)
    monkeypatch.setattr(config, "current", lambda: config.load({"NEURON_FUSION_HOT": "5"}))
    assert fused_eager.default_cache().hot == 5
    assert fused_eager.stats()["hot"] == 5 and fused_eager.wait_for_compiles(timeout=1)
    assert fused_eager.lookup(chains.arithmetic()[0]) is None
    assert fused_eager.stats()["lookups"] == 1


def test_a_forked_child_compiles_on_a_thread_of_its_own():
    import os

    compile = RecordingCompile()
    compile.release.clear()
    cache = ChainCache(hot=1, compile=compile)
    chain, _ = chains.arithmetic()
    cache.lookup(chain)  # the parent's compile thread holds it
    pid = os.fork()
    if pid == 0:  # the child: no compile pending, and a new thread compiles what it needs
        ok = cache.stats()["pending"] == 0
        compile.release.set()
        cache.lookup(chain)
        ok = ok and cache.wait(timeout=30) and cache.lookup(chain) is not None
        os._exit(0 if ok and compile.threads[-1] is not threading.current_thread() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert cache.stats()["pending"] == 1  # the parent's compile is still its own
    compile.release.set()
    assert cache.wait(timeout=30)
