"""TorchTitan's Llama debug model trained with FSDP over 2 processes on neuron, offline (assets
from titan_assets.py), against the same training in one process.

TorchTitan has no CPU path (with no accelerator it picks "cuda"), so the one-process reference
runs on one neuron device, whose kernels are PyTorch's CPU kernels. Both runs start from one seed
checkpoint (TorchTitan's own recipe for comparing numerics across parallelisms: a sharded random
init cannot equal an unsharded one, on CUDA either) and read the same samples (the dataset holds
every document twice, and each of the 2 ranks reads one contiguous half). Parameters stay float32
(`--training.mixed-precision-param float32`): FSDP's bf16 parameters and the single process's
bf16 autocast round differently, which would hide a real mismatch in a looser tolerance.

Needs `torchtitan==0.2.2` and `triton` importable (TorchTitan imports it unconditionally); see
docs/torchtitan.md."""

import os
import re
import subprocess
import sys

import pytest
import torch
from dist_world import free_port
from titan_assets import write_assets

pytestmark = pytest.mark.slow
STEPS = 6
SEED_CHECKPOINT = "seed/checkpoint/step-0"


def titan_command(nproc: int, dump_folder: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
            f"--nproc-per-node={nproc}", "--master-addr=127.0.0.1", f"--master-port={free_port()}",
            "-m", "torchtitan.train",
            "--model.name", "llama3", "--model.flavor", "debugmodel",
            "--model.hf-assets-path", "tests/assets/tokenizer",
            "--training.steps", str(STEPS), "--training.seq-len", "128",
            "--training.local-batch-size", "2",
            "--training.mixed-precision-param", "float32",
            "--parallelism.data-parallel-shard-degree", str(nproc),
            "--activation-checkpoint.mode", "none",
            "--debug.seed", "42", "--debug.deterministic", "--metrics.log-freq", "1",
            "--job.dump-folder", dump_folder, "--checkpoint.enable", *extra]


def metrics(log: str) -> tuple[list[float], list[float]]:
    """(losses, grad norms) per step, from rank 0's metric lines."""
    found = {}
    clean = re.sub(r"\x1b\[[0-9;]*m", "", log)
    for step, loss, norm in re.findall(r"step:\s*(\d+)\s+loss:\s*([0-9.]+)\s+grad_norm:\s*([0-9.]+)",
                                       clean):
        found[int(step)] = (float(loss), float(norm))
    steps = sorted(found)
    return [found[s][0] for s in steps], [found[s][1] for s in steps]


def run_titan(root, nproc: int, dump_folder: str, *extra: str) -> str:
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HOME=str(root / "hf"))
    done = subprocess.run(titan_command(nproc, dump_folder, *extra), cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    return log


def test_torchtitan_llama_debug_fsdp_on_neuron_matches_one_process(tmp_path):
    pytest.importorskip("torchtitan")
    pytest.importorskip("triton")
    write_assets(str(tmp_path), copies=2)
    log = run_titan(tmp_path, 1, "seed", "--checkpoint.create-seed-checkpoint")
    assert "Created seed checkpoint" in log, log[-4000:]
    load_seed = ("--checkpoint.initial-load-path", SEED_CHECKPOINT, "--checkpoint.load-only")

    fsdp_log = run_titan(tmp_path, 2, "fsdp", *load_seed)
    assert "dp_shard=2" in fsdp_log and "NEURON capacity" in fsdp_log, fsdp_log[-4000:]
    assert f"Loading the checkpoint from {SEED_CHECKPOINT}" in fsdp_log
    fsdp_loss, fsdp_norm = metrics(fsdp_log)
    single_loss, single_norm = metrics(run_titan(tmp_path, 1, "single", *load_seed))

    assert len(fsdp_loss) == len(single_loss) == STEPS, (fsdp_loss, single_loss)
    assert fsdp_loss[-1] < fsdp_loss[0] - 0.1, fsdp_loss  # it learns
    # Same weights, same samples: only the order of float32 sums differs (measured: equal to
    # the 5 printed decimals). Logged values are rounded, hence the absolute part.
    torch.testing.assert_close(torch.tensor(fsdp_loss), torch.tensor(single_loss),
                               rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor(fsdp_norm), torch.tensor(single_norm),
                               rtol=1e-3, atol=1e-4)
