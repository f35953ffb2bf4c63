"""Per-kernel estimates from instruction counts: the counts, bytes and FLOPs of a kernel whose
instructions are known by hand, the engine times from the profile table's figures (shared with
the profiler's roofline), and the trace leaves nki.isa as it was."""

import dataclasses
import importlib
import math

import pytest
import torch

from torchneuron.kernels.library.attention import attention_forward_kernel
from torchneuron.kernels.library.estimate import estimate
from torchneuron.kernels.library.matmul import matmul_kernel
from torchneuron.kernels.library.rms_norm import rms_norm_kernel
from torchneuron.kernels.nki import isa
from torchneuron.profiler.roofline import hbm_bandwidth, peak_flops
from torchneuron.runtime.profiles import PROFILES

# the module (the package's `estimate` is its function)
est_module = importlib.import_module("torchneuron.kernels.library.estimate")


def test_matmul_counts_and_times_by_hand():
    a, b = torch.empty(256, 256), torch.empty(256, 512)
    e = estimate(matmul_kernel, a, b, profile="trn2")
    # 2 row tiles x 1 column tile x 2 contraction tiles; each loads a 128x128 stationary
    # (transposing DMA) and a 128x512 moving tile; 2 stores of 128x512 tiles.
    assert e.instructions["tensor"] == 4 and e.instructions["dma"] == 4 * 2 + 2
    assert e.matmul_flops == 2 * 256 * 256 * 512
    dma_bytes = 4 * 4 * (128 * 128 + 128 * 512) + 2 * 4 * 128 * 512
    assert e.dma_bytes == dma_bytes
    trn2 = PROFILES["trn2"]
    assert e.engine_s["dma"] == pytest.approx(dma_bytes / hbm_bandwidth(trn2, 1))
    clock = peak_flops(trn2, 1, torch.bfloat16) / (2 * 128 * 128)
    fp32_cycles = peak_flops(trn2, 1, torch.bfloat16) / peak_flops(trn2, 1, torch.float32)
    expected_tensor = 4 * (512 * fp32_cycles + trn2.engine_instruction_overhead_cycles) / clock
    assert e.engine_s["tensor"] == pytest.approx(expected_tensor)
    assert e.seconds == pytest.approx(max(e.engine_s.values()) + trn2.kernel_launch_s)
    assert e.bound == "dma"  # this kernel reloads its tiles for every output tile


def test_bfloat16_matmul_is_cheaper_on_the_tensor_engine_and_trn3_moves_bytes_faster():
    f32 = estimate(matmul_kernel, torch.empty(256, 256), torch.empty(256, 512), profile="trn2")
    bf16 = estimate(matmul_kernel, torch.empty(256, 256, dtype=torch.bfloat16),
                    torch.empty(256, 512, dtype=torch.bfloat16), profile="trn2")
    assert bf16.engine_s["tensor"] < f32.engine_s["tensor"] / 2
    trn3 = estimate(matmul_kernel, torch.empty(256, 256), torch.empty(256, 512), profile="trn3")
    assert trn3.engine_s["dma"] == pytest.approx(f32.engine_s["dma"] * 2.9 / 4.9)


def test_rms_norm_is_bound_by_vector_work_or_bytes_and_counts_per_tile():
    rows, d = 1000, 512
    e = estimate(rms_norm_kernel, torch.empty(rows, d), torch.empty(d), 1e-6)
    tiles = math.ceil(rows / 128)
    assert e.instructions["scalar"] == 2 * tiles  # squares + rsqrt per tile
    assert e.instructions["vector"] == 2 * tiles  # normalise + weight per tile
    assert e.instructions["dma"] == 1 + 3 * tiles  # weight once; per tile: load, 2 stores
    assert e.instructions["tensor"] == 0 and e.bound in ("vector", "dma")


def test_large_shapes_trace_without_computing_and_leave_isa_untouched():
    before = {n: getattr(isa, n) for n in est_module._ENGINE_OF}
    q = torch.empty(4, 4096, 128, dtype=torch.bfloat16)
    kv = torch.empty(1, 4096, 128, dtype=torch.bfloat16)
    e = estimate(attention_forward_kernel, q, kv, kv, 0.088, True)
    tiles = 4096 // 128
    assert e.instructions["tensor"] == 4 * (tiles * (tiles + 1) // 2) * 3  # causal half
    assert {n: getattr(isa, n) for n in before} == before
    with pytest.raises(Exception):
        estimate(matmul_kernel, torch.empty(4, 5), torch.empty(6, 7))
    assert {n: getattr(isa, n) for n in before} == before


def test_the_vector_engines_model_comes_from_the_profile(monkeypatch):
    """The Vector/Scalar/GpSimd clock and issue cost are the profile table's fields: a profile
    with another clock or cost gives another estimate, by the model's formula."""
    rows, d = 256, 512
    args = (torch.empty(rows, d), torch.empty(d), 1e-6)
    trn2 = PROFILES["trn2"]
    base = estimate(rms_norm_kernel, *args, profile="trn2")
    # two row tiles; each: squares over d, rsqrt over 1 column (Scalar Engine)
    assert base.engine_s["scalar"] == pytest.approx(
        2 * ((d + trn2.engine_instruction_overhead_cycles)
             + (1 + trn2.engine_instruction_overhead_cycles)) / trn2.engine_clock_hz)
    changed = dataclasses.replace(trn2, engine_clock_hz=trn2.engine_clock_hz / 2,
                                  engine_instruction_overhead_cycles=0)
    monkeypatch.setitem(PROFILES, "trn2", changed)
    slower = estimate(rms_norm_kernel, *args, profile="trn2")
    assert slower.engine_s["scalar"] == pytest.approx(2 * (d + 1) / changed.engine_clock_hz)
    assert slower.engine_s["dma"] == base.engine_s["dma"]  # bytes do not depend on the clock
