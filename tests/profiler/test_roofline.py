"""The Trainium time estimate against figures computed by hand from the trn2 profile: one
logical NeuronCore (LNC=2) has a quarter of the chip's 181 TFLOP/s FP32 and 667 TFLOP/s BF16
and of its 2.9 TB/s HBM, and every kernel pays the profile's 2 us launch cost."""

import json
import subprocess
import sys

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from torchneuron.profiler import (add_estimated_track, estimate_activity, estimate_step,
                                  summary, table)
from torchneuron.runtime.profiles import PROFILES

TRN2 = PROFILES["trn2"]
FP32 = 181e12 / 4
BF16 = 667e12 / 4
HBM = 2.9e12 / 4
LAUNCH = 2e-6


def est(name, inputs, outputs):
    return estimate_activity(name, inputs, outputs, TRN2, 2)


def test_matmul_by_hand():
    e = est("aten::mm", [((256, 512), "Float"), ((512, 128), "Float")], [((256, 128), "Float")])
    flops = 2 * 256 * 512 * 128                          # 33,554,432
    nbytes = (256 * 512 + 512 * 128 + 256 * 128) * 4     # 917,504
    assert (e.flops, e.bytes) == (flops, nbytes)
    assert e.seconds == pytest.approx(max(flops / FP32, nbytes / HBM) + LAUNCH)  # 3.2655 us
    assert e.bound == "memory"


def test_large_bf16_matmul_is_compute_bound():
    n = 4096
    e = est("aten::mm", [((n, n), "BFloat16"), ((n, n), "BFloat16")], [((n, n), "BFloat16")])
    assert e.flops == 2 * n ** 3
    assert e.seconds == pytest.approx(2 * n ** 3 / BF16 + LAUNCH)  # 826.2 us
    assert e.bound == "compute"


def test_pointwise_by_hand():
    shape = (1024, 1024)
    e = est("aten::add", [(shape, "Float"), (shape, "Float"), ((), "scalar")], [(shape, "Float")])
    assert e.flops == 1024 * 1024                      # one per output element
    assert e.bytes == 3 * 1024 * 1024 * 4              # two reads and a write, 12,582,912
    assert e.seconds == pytest.approx(3 * 1024 * 1024 * 4 / HBM + LAUNCH)  # 19.355 us
    assert e.bound == "memory"


def test_reduction_by_hand():
    e = est("aten::sum", [((4096, 256), "BFloat16")], [((4096,), "BFloat16")])
    assert e.flops == 4096 * 256                       # one per input element
    assert e.bytes == (4096 * 256 + 4096) * 2
    assert e.seconds == pytest.approx((4096 * 256 + 4096) * 2 / HBM + LAUNCH)  # 4.904 us


def test_copies_move_bytes_and_compute_nothing():
    e = est("aten::copy_", [((100,), "Float"), ((100,), "Float")], [((100,), "Float")])
    assert e.flops == 0 and e.bound == "memory"


def test_trn3_is_faster_for_the_same_kernel():
    args = ([((2048, 2048), "BFloat16")] * 2, [((2048, 2048), "BFloat16")])
    trn3 = estimate_activity("aten::mm", *args, PROFILES["trn3"], 2)
    assert trn3.seconds < est("aten::mm", *args).seconds


def profile_step():
    torch.manual_seed(0)
    x = torch.randn(128, 256)
    w = torch.randn(256, 64)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        y = (x.to("neuron") @ w.to("neuron")).relu().sum(dim=0)
    torch.testing.assert_close(y.cpu(), (x @ w).relu().sum(dim=0))
    return prof


def test_step_summary_names_the_profile_and_sums_kernels():
    prof = profile_step()
    step = estimate_step()
    names = [r["name"] for r, _ in step.kernels]
    assert {"aten::mm", "aten::relu", "aten::sum"} <= set(names)
    mm = next(e for r, e in step.kernels if r["name"] == "aten::mm")
    assert mm.flops == 2 * 128 * 256 * 64
    assert step.estimated_s == pytest.approx(sum(e.seconds for _, e in step.kernels))
    assert 0 < step.mfu() < 1
    text = summary(step)
    assert "trn2" in text and "MFU" in text and "aten::mm" in text
    assert "compute-bound" in text and "memory-bound" in text
    assert len(text.splitlines()) <= 25  # one screen
    tab = table(prof, sort_by="estimated_time_total")
    assert "Est. trn2 total" in tab
    assert tab.splitlines()[2].split()[0] in names  # the top row is a device kernel
    with pytest.raises(ValueError, match="sort_by"):
        table(prof, sort_by="nonsense")


def test_estimated_track_in_the_trace(tmp_path):
    prof = profile_step()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert add_estimated_track(trace, TRN2, 2) == len(kernels)
    track = [e for e in trace["traceEvents"] if e.get("cat") == "neuron_estimate"]
    mm = next(e for e in track if e["name"] == "aten::mm")
    expected = est("aten::mm", [((128, 256), "Float"), ((256, 64), "Float")],
                   [((128, 64), "Float")])
    assert mm["dur"] == pytest.approx(expected.seconds * 1e6)
    starts = sorted((e["ts"], e["ts"] + e["dur"]) for e in track)
    assert all(a_end <= b_start + 1e-6 for (_, a_end), (b_start, _) in zip(starts, starts[1:]))
    names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M"
             and e.get("name") == "process_name" and e["pid"] >= 1_000_000]
    assert names == ["neuron 0 estimated (trn2)"]


def test_estimate_command(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import sys, torch\n"
                      "x = torch.ones(64, 64, device='neuron')\n"
                      "y = x @ x\n"
                      "assert sys.argv[1:] == ['--steps', '1']\n"
                      "torch.testing.assert_close(y.cpu(), torch.ones(64, 64) @ torch.ones(64, 64))\n")
    out = subprocess.run([sys.executable, "-m", "torchneuron.cli", "estimate", str(script),
                          "--steps", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "trn2" in out.stdout and "aten::mm" in out.stdout and "MFU" in out.stdout


def test_estimate_command_passes_the_scripts_exit_status(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text("import sys\nsys.exit(3)\n")
    out = subprocess.run([sys.executable, "-m", "torchneuron.cli", "estimate", str(script)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 3
    assert "estimated" in out.stdout
