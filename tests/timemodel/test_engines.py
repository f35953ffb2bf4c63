"""Each engine term of the time model (torchneuron/timemodel/engines.py, collectives.py) on
cases computed by hand from the machine table's figures (runtime/profiles.py, MACHINES)."""

from __future__ import annotations

import pytest
import torch

from torchneuron.runtime.profiles import MACHINES, PROFILES
from torchneuron.timemodel import engines
from torchneuron.timemodel.collectives import collective_s

TRN1, TRN2, H100 = MACHINES["trn1"], MACHINES["trn2"], MACHINES["h100"]


def test_one_full_tile_is_one_multiply_moving_of_512_columns():
    # stationary 128x128, moving 128x512: one MultiplyMoving of 512 cycles at 2.8 GHz, 90%.
    expected = 512 / 2.8e9 / 0.9
    assert engines.tensor_engine_s(128, 128, 512, TRN1, 1) == pytest.approx(expected)


def test_a_partial_tile_costs_a_full_one():
    # 130 = 128 + 2: two contraction tiles and two stationary tiles of 130 columns each
    # (2 * 2 * 130 cycles) against one tile of 128 columns for 128: the tile-fill loss.
    full = engines.tensor_engine_s(128, 128, 128, TRN1, 1)
    over = engines.tensor_engine_s(130, 130, 130, TRN1, 1)
    assert over / full == pytest.approx(2 * 2 * 130 / 128)


def test_a_single_token_pays_the_minimum_instruction_cost():
    # Decode: [1, 4096] @ [4096, 4096]. The weight is stationary (32 x 32 tiles), the token
    # streams 1 column: max(1, 64) = 64 cycles per MultiplyMoving, 32 * 32 * 64 cycles.
    expected = 32 * 32 * 64 / 2.8e9 / 0.9
    assert engines.tensor_engine_s(1, 4096, 4096, TRN1, 1) == pytest.approx(expected)


def test_float32_is_four_times_bf16_and_lnc2_halves_the_time():
    bf16 = engines.tensor_engine_s(512, 512, 512, TRN2, 1, torch.bfloat16)
    assert engines.tensor_engine_s(512, 512, 512, TRN2, 1, torch.float32) == pytest.approx(4 * bf16)
    lnc2 = engines.tensor_engine_s(512, 512, 512, TRN2, 2, torch.bfloat16)
    assert lnc2 == pytest.approx(bf16 / 2)


def test_the_tensor_engine_clock_gives_the_published_peak():
    # 128 x 128 multiply-adds per cycle per physical core: trn2's 8 cores at 2.4 GHz make the
    # chip's published 667 dense BF16 TFLOPS within 6% (the guide's 79 TFLOPS per core).
    per_core = 2 * 128 * 128 * TRN2.tensor_clock_hz
    assert per_core * TRN2.cores_per_chip == pytest.approx(TRN2.peak_bf16_flops_per_chip, rel=0.06)


def test_gpu_matmul_runs_in_waves_of_one_tile_per_sm():
    # 4096^3 bf16 on H100: 32 x 32 = 1024 output tiles of 128x128, 132 SMs: 8 waves.
    per_sm = 989e12 / 132
    expected = 8 * 2 * 128 * 128 * 4096 / per_sm / 0.9
    assert engines.tensor_engine_s(4096, 4096, 4096, H100, 1) == pytest.approx(expected)


def test_vector_engine_one_element_per_lane_per_cycle_per_input():
    # 128 x 1000 float32 elements, two inputs: 2 * 1000 cycles + 100 of instruction overhead.
    expected = (2 * 1000 + 100) / 1.12e9 / 0.9
    assert engines.vector_engine_s(128 * 1000, TRN1, 1, inputs=2) == pytest.approx(expected)
    # Trainium2's performance mode: 4x the lanes for bf16.
    expected = (1000 // 4 + 100) / 0.96e9 / 0.9
    bf16 = engines.vector_engine_s(128 * 1000, TRN2, 1, 1, torch.bfloat16)
    assert bf16 == pytest.approx(expected)


def test_scalar_engine_one_input():
    expected = (1000 + 100) / 1.4e9 / 0.9
    assert engines.scalar_engine_s(128 * 1000, TRN1, 1) == pytest.approx(expected)


def test_dma_at_the_ranks_share_of_hbm():
    # trn2, LNC=2: 4 logical cores share the chip's 2.9 TB/s, at 60% of it.
    expected = 1e9 / (2.9e12 / 4) / 0.6
    assert engines.dma_s(10**9, TRN2, 2) == pytest.approx(expected)


def test_ring_all_reduce_inside_an_instance():
    # trn1, 32 ranks (16 chips x 2 cores): 62 steps of 0.75 us, 62/32 of 1 MB at 384/2 GB/s.
    expected = 62 * 0.75e-6 + 62 / 32 * 1e6 / 192e9
    assert collective_s("all_reduce", 10**6, 32, TRN1, 1) == pytest.approx(expected)
    expected = 31 * 0.75e-6 + 31 / 32 * 1e6 / 192e9
    assert collective_s("all_gather", 10**6, 32, TRN1, 1) == pytest.approx(expected)
    assert collective_s("all_reduce", 10**6, 1, TRN1, 1) == 0.0


def test_a_group_across_instances_goes_over_the_network():
    # 64 trn1 ranks span two instances: 800 Gbps EFA shared by an instance's 32 ranks.
    expected = 63 * 7.5e-6 + 63 / 64 * 1e6 / (100e9 / 32)
    assert collective_s("reduce_scatter", 10**6, 64, TRN1, 1) == pytest.approx(expected)


def test_unknown_collective_and_no_ranks_are_errors():
    with pytest.raises(ValueError, match="unknown collective 'broadcast'"):
        collective_s("broadcast", 1, 2, TRN1, 1)
    with pytest.raises(ValueError, match="at least one rank"):
        collective_s("all_reduce", 1, 0, TRN1, 1)


def test_trainium_machines_take_their_chip_figures_from_the_device_profiles():
    for name in ("trn2", "trn3"):
        machine, chip = MACHINES[name], PROFILES[name]
        assert machine.hbm_bandwidth_per_chip == chip.hbm_bandwidth_bytes_per_s
        assert machine.peak_bf16_flops_per_chip == chip.peak_bf16_flops_per_chip
        assert machine.cores_per_chip == chip.neuron_cores_per_chip


def test_every_machine_names_its_sources():
    for machine in MACHINES.values():
        assert machine.sources and all(s.startswith("https://") for s in machine.sources)
