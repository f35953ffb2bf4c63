"""A second process starts warm: it finds the chain this process compiled in Inductor's FX graph
cache (same signature, same digest, same device) and loads it instead of generating code."""

from __future__ import annotations

import json

import pytest

from torchneuron.fused_eager.policy import cache_dir

from . import chains

SECOND_PROCESS = """
import json, sys, time, torch
from tests.fused_eager import chains
from torchneuron.fused_eager import ChainCache
torch.manual_seed(0)
device = sys.argv[1]
chain, inputs = chains.mean_end()
cache = ChainCache(hot=1)
cache.lookup(chain, device)
assert cache.wait(timeout=120)
kernel = cache.lookup(chain, device)
assert kernel.device == device
(got,) = kernel.run(chains.on_device(inputs, device))
assert got.device.type == device
torch.testing.assert_close(got.cpu(), chain.run_eager(inputs)[0])
print(json.dumps({"digest": chain.digest(), "stats": cache.stats(),
                  "seconds": kernel.compile_seconds}))
"""


@pytest.mark.parametrize("device", ["cpu", "neuron"])
def test_a_second_process_loads_the_compiled_chain_from_disk(python, device):
    # Both processes are fresh: this one's Inductor configuration may have been changed by other
    # tests (the cache key includes it), a user's second process starts from the same one as its
    # first. The first compiles the chain (or loads it from an earlier run); the second loads it.
    reports = []
    for _ in range(2):
        done = python(f"import sys; sys.argv[1:] = [{device!r}]\n" + SECOND_PROCESS, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        reports.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert reports[0]["digest"] == reports[1]["digest"] == chains.mean_end()[0].digest()
    stats = reports[1]["stats"]
    assert stats["fxgraph_cache_hit"] == 1 and stats["fxgraph_cache_miss"] == 0, stats
    assert stats.get("fxgraph_cache_bypass", 0) == 0, stats
    assert stats["cache_dir"] == cache_dir()
