"""TorchTitan's Llama debug model trained on neuron, offline (assets from titan_assets.py), with
FSDP over 2 processes and with FSDP x tensor parallel over 4, each against the same training in
one process, and a run resumed from its checkpoint against the run that did not stop.

TorchTitan has no CPU path (with no accelerator it picks "cuda"), so the one-process reference
runs on one neuron device, whose kernels are PyTorch's CPU kernels. Both runs start from one seed
checkpoint (TorchTitan's own recipe for comparing numerics across parallelisms: a sharded random
init cannot equal an unsharded one, on CUDA either) and read the same samples (the dataset holds
every document twice, and each of the 2 ranks reads one contiguous half). Parameters stay float32
(`--training.mixed-precision-param float32`): FSDP's bf16 parameters and the single process's
bf16 autocast round differently, which would hide a real mismatch in a looser tolerance.

Needs `torchtitan==0.2.2` and `triton` importable (TorchTitan imports it unconditionally):
`make test-titan` installs them and runs this module; see docs/torchtitan.md."""

import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
from dist_world import free_port
from titan_assets import write_assets

pytestmark = pytest.mark.slow
STEPS = 6
SEED_CHECKPOINT = "seed/checkpoint/step-0"


def titan_command(nproc: int, dump_folder: str, *extra: str, dp_shard: int | None = None,
                  tp: int = 1) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
            f"--nproc-per-node={nproc}", "--master-addr=127.0.0.1", f"--master-port={free_port()}",
            "-m", "torchtitan.train",
            "--model.name", "llama3", "--model.flavor", "debugmodel",
            "--model.hf-assets-path", "tests/assets/tokenizer",
            "--training.steps", str(STEPS), "--training.seq-len", "128",
            "--training.local-batch-size", "2",
            "--training.mixed-precision-param", "float32",
            "--parallelism.data-parallel-shard-degree", str(dp_shard or nproc),
            "--parallelism.tensor-parallel-degree", str(tp),
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


def run_titan(root, nproc: int, dump_folder: str, *extra: str, **parallel) -> str:
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HOME=str(root / "hf"))
    done = subprocess.run(titan_command(nproc, dump_folder, *extra, **parallel), cwd=root,
                          env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    return log


LOAD_SEED = ("--checkpoint.initial-load-path", SEED_CHECKPOINT)


@pytest.fixture(scope="module")
def titan(tmp_path_factory):
    """The assets, the seed checkpoint every run starts from, and the one-process run."""
    pytest.importorskip("torchtitan")
    pytest.importorskip("triton")
    root = tmp_path_factory.mktemp("titan")
    write_assets(str(root), copies=2)
    log = run_titan(root, 1, "seed", "--checkpoint.create-seed-checkpoint")
    assert "Created seed checkpoint" in log, log[-4000:]
    single_loss, single_norm = metrics(run_titan(root, 1, "single", *LOAD_SEED,
                                                 "--checkpoint.load-only"))
    assert len(single_loss) == STEPS and single_loss[-1] < single_loss[0] - 0.1, single_loss
    return root, single_loss, single_norm


def assert_same_training(losses, norms, single_loss, single_norm):
    # Same weights, same samples: only the order of float32 sums differs (measured: equal to
    # the 5 printed decimals). Logged values are rounded, hence the absolute part.
    assert len(losses) == len(single_loss), (losses, single_loss)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(single_loss),
                               rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor(norms), torch.tensor(single_norm),
                               rtol=1e-3, atol=1e-4)


def test_torchtitan_llama_debug_fsdp_on_neuron_matches_one_process(titan):
    root, single_loss, single_norm = titan
    # Saves step 3 and step 6 (the resume test starts from step 3).
    fsdp_log = run_titan(root, 2, "fsdp", *LOAD_SEED, "--checkpoint.interval", "3")
    assert "dp_shard=2" in fsdp_log and "NEURON capacity" in fsdp_log, fsdp_log[-4000:]
    assert f"Loading the checkpoint from {SEED_CHECKPOINT}" in fsdp_log
    assert_same_training(*metrics(fsdp_log), single_loss, single_norm)


def test_torchtitan_fsdp_times_tensor_parallel_on_4_ranks_matches_one_process(titan):
    root, single_loss, single_norm = titan
    log = run_titan(root, 4, "fsdp_tp", *LOAD_SEED, "--checkpoint.load-only", dp_shard=2, tp=2)
    assert "dp_shard=2" in log and "tp=2" in log, log[-4000:]
    assert_same_training(*metrics(log), single_loss, single_norm)


def test_torchtitan_resumes_from_its_checkpoint(titan):
    root, single_loss, single_norm = titan
    if not (root / "fsdp" / "checkpoint" / "step-3").is_dir():
        pytest.skip("needs the FSDP test's checkpoints (run the module, not this test alone)")
    shutil.copytree(root / "fsdp", root / "resumed")
    shutil.rmtree(root / "resumed" / "checkpoint" / "step-6")  # as if the run stopped at step 3
    log = run_titan(root, 2, "resumed", *LOAD_SEED)
    assert "Loading the checkpoint from" in log and "step-3" in log, log[-4000:]
    losses, norms = metrics(log)
    # Steps 4-6 only, from the saved model, optimizer, data loader and schedule.
    assert_same_training(losses, norms, single_loss[3:], single_norm[3:])
