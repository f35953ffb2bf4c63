"""Fused mode compiles hot chains on a thread of its own while the caller keeps working: the
caller's CPU random numbers drawn during a compile are the ones its seed gives, as without
fusion (Inductor saves and restores the process's random state around a compile; on the compile
thread that restore would rewind the caller's draws: torchneuron/fused_eager/background_rng.py)."""

from __future__ import annotations

import json

from tests.conftest import run_python

DRAWS_DURING_A_COMPILE = """
import json, time, torch, torchneuron
from torchneuron.fused_eager import queue_feeder

x = torch.randn(128, 1024, device="neuron")

def chain():
    return ((x * 1.7 + 0.3).sin() * x).cos()

for _ in range(10):  # until the chain is hot (NEURON_FUSION_HOT=2) and its compile requested
    chain()
    torch.neuron.synchronize()
    if queue_feeder.stats()["requested"]:
        break
torch.manual_seed(7)
draws = []
deadline = time.monotonic() + 240
while queue_feeder.stats()["compiled"] == 0 and time.monotonic() < deadline:
    draws.append(torch.rand(4))
    time.sleep(0.001)  # the compile thread needs the GIL too
compiled = queue_feeder.stats()["compiled"]
draws += [torch.rand(4) for _ in range(20)]  # after the compile ended
torch.manual_seed(7)
expected = [torch.rand(4) for _ in draws]
print(json.dumps({"compiled": compiled, "draws": len(draws),
                  "same": all(torch.equal(a, b) for a, b in zip(draws, expected))}))
"""


def test_random_numbers_drawn_during_a_background_compile_follow_the_seed(tmp_path):
    out = run_python(DRAWS_DURING_A_COMPILE, timeout=300,
                     env={"NEURON_EAGER_MODE": "fused", "NEURON_FUSION_HOT": "2",
                          "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)})  # a miss: a real compile
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["compiled"] == 1 and result["draws"] > 20, result
    assert result["same"], result
