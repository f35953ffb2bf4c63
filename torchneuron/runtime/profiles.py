"""Device profiles: the one table of facts about each Trainium generation.

A `neuron` device is one *logical* NeuronCore: with the default logical-core configuration
(LNC=2) the runtime fuses two physical cores into one device, as the Neuron SDK does. Per-device
figures are the chip's divided among its logical cores.
"""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True)
class ChipProfile:
    name: str
    neuron_cores_per_chip: int  # physical NeuronCores
    default_logical_nc_config: int  # physical cores fused into one logical core (LNC)
    hbm_bytes_per_chip: int
    hbm_bandwidth_bytes_per_s: float
    peak_bf16_flops_per_chip: float  # dense
    peak_fp8_flops_per_chip: float  # dense
    max_chips: int  # largest instance of this generation

    def logical_cores_per_chip(self, lnc: int) -> int:
        return self.neuron_cores_per_chip // lnc

    def hbm_bytes_per_device(self, lnc: int) -> int:
        return self.hbm_bytes_per_chip // self.logical_cores_per_chip(lnc)

    def per_device(self, chip_figure: float, lnc: int) -> float:
        return chip_figure / self.logical_cores_per_chip(lnc)


PROFILES: dict[str, ChipProfile] = {
    # AWS Neuron documentation, "Trainium2 Architecture" (awsdocs-neuron, arch/neuron-hardware/
    # trainium2): 8 NeuronCore-v3 per chip, 96 GiB HBM at 2.9 TB/s, 667 dense BF16 TFLOPS and
    # 1299 dense FP8 TFLOPS per chip; trn2.48xlarge has 16 chips; LNC=2 is the default.
    "trn2": ChipProfile(
        name="trn2",
        neuron_cores_per_chip=8,
        default_logical_nc_config=2,
        hbm_bytes_per_chip=96 * GiB,
        hbm_bandwidth_bytes_per_s=2.9e12,
        peak_bf16_flops_per_chip=667e12,
        peak_fp8_flops_per_chip=1299e12,
        max_chips=16,
    ),
    # AWS Trainium3 announcement (re:Invent, December 2025) and Neuron documentation
    # "Trainium3 Architecture": 8 NeuronCore-v4 per chip, 144 GiB HBM3e at 4.9 TB/s,
    # 2.52 dense FP8 (MXFP8) PFLOPS and 671 dense BF16 TFLOPS per chip; Trn3 UltraServer
    # nodes carry 16 chips per instance.
    "trn3": ChipProfile(
        name="trn3",
        neuron_cores_per_chip=8,
        default_logical_nc_config=2,
        hbm_bytes_per_chip=144 * GiB,
        hbm_bandwidth_bytes_per_s=4.9e12,
        peak_bf16_flops_per_chip=671e12,
        peak_fp8_flops_per_chip=2517e12,
        max_chips=16,
    ),
}

DEFAULT_PROFILE = "trn2"
