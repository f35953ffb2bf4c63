"""`torchneuron readiness --nproc-per-node 2`: a DDP script on two neuron devices through
torchrun gives a report per rank (named by its process group's rank) and a merged one with a
row per rank."""

import json
import os
import subprocess
import sys

import pytest

import torchneuron
from torchneuron.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(torchneuron.__file__)))

DDP_SCRIPT = """\
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.neuron.set_device(local_rank)
dist.init_process_group(backend="neuron")
model = DDP(torch.nn.Linear(8, 4).to(f"neuron:{local_rank}"), device_ids=[local_rank])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(16, 8, device=f"neuron:{local_rank}")
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("rank", dist.get_rank(), loss.item())
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_ddp_script_gives_a_report_per_rank_and_a_merged_one(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "torchneuron.cli", "readiness",
                             "--nproc-per-node", "2", "--out", str(out), str(script)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600,
                            env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((out / f"report.rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1]
    for r in ranks:
        assert r["steps"]["count"] == 3 and r["accounting"]["syncs"]["by_cause"]["item"] >= 3
    merged = json.loads((out / "report.json").read_text())
    assert [row["rank"] for row in merged["ranks"]] == [0, 1]
    assert [row["steps"] for row in merged["ranks"]] == [3, 3]
    assert (out / "report.html").exists() and 'id="ranks"' in (out / "report.html").read_text()
    assert "rank 1: ok, 3 steps" in result.stdout


def test_nproc_per_node_below_one_is_refused(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    assert main(["readiness", "--nproc-per-node", "0", str(script)]) == 2
    assert "--nproc-per-node 0: must be at least 1" in capsys.readouterr().err
