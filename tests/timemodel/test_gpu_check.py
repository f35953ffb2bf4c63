"""The GPU side of the time model's check (benchmarks/gpu/h100_time_model.py) loads the time
model's transformer without torchneuron, and benchmarks/time_model.py prices every workload it
times and reads its JSON. No GPU is needed: the timing itself runs only where CUDA is."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
# A script's folder comes first on its sys.path: the checkout's torchneuron must come next.
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SCRIPT = ROOT / "benchmarks" / "gpu" / "h100_time_model.py"


def test_the_gpu_script_needs_neither_torchneuron_nor_its_build():
    code = ("import sys, runpy; sys.modules['torchneuron'] = None; "
            f"m = runpy.run_path({str(SCRIPT)!r}); tf = m['load_transformer']();"
            "print(tf.RankModel.__name__, len(m['WORKLOADS']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
                                            "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["RankModel", "6"]


def test_the_gpu_script_refuses_to_run_without_cuda():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          timeout=120, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
                                            "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and "no CUDA device" in done.stderr


def test_time_model_sets_predictions_beside_measured_gpu_times(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import time_model
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    workloads = time_model.gpu_workloads()
    fake = {"device": "test", "torch": "x", "graphs": True,
            "workloads": {name: [1.0, 2.0, 3.0] for name in workloads}}
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(fake))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "time_model.py"),
                           "--gpu-results", str(path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr
    for name in workloads:
        line = next(l for l in done.stdout.splitlines() if l.startswith(name))
        predicted = float(line.split("predicted")[1].split("ms")[0])
        assert predicted > 0 and "measured     2.000 ms (1.000..3.000)" in line
    # The matmul's prediction is the engine terms' by hand: 4096^3 on 132 SMs in 8 waves.
    assert time_model.predict_gpu_ms(("matmul", 4096, 4096, 4096), True) == pytest.approx(
        (8 * 2 * 128 * 128 * 4096 / (989e12 / 132) / 0.9 + 2e-6) * 1e3)


def test_the_gpu_scripts_steps_run_the_time_models_transformer():
    # The steps the GPU script times, run here on the CPU with a tiny configuration: a decode
    # step against a KV cache and a prefill, as the time model traces them.
    import runpy

    script = runpy.run_path(str(SCRIPT))
    tf = script["load_transformer"]()
    tiny = tf.TransformerConfig("tiny", 64, 2, 4, 2, 128, 100, "test")
    for workload, context in (("decode", 16), ("prefill", 16)):
        step = script["transformer_step"](tf, tiny, workload, 2, context, graphs=False,
                                          device="cpu")
        logits = step()
        assert logits.shape == (2, 1, 100) and torch.isfinite(logits.float()).all()
    assert script["matmul_step"](4, 8, 16, device="cpu")().shape == (4, 16)
