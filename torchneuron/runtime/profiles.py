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
    peak_fp32_flops_per_chip: float  # dense
    max_chips: int  # largest instance of this generation
    # One physical NeuronCore's on-chip memories, as NKI kernels see them (kernels/nki/rules.py):
    nc_version: str  # NKI's name for the NeuronCore generation (nki.isa.nc_version)
    partitions: int  # SBUF/PSUM partitions = Tensor Engine rows
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    psum_banks: int  # a matmul accumulates into one bank (NeuronCore-v3) or up to all (v4)
    matmul_moving_fmax: int  # largest moving free size of one nc_matmul, float32 PSUM output
    # Fixed cost the roofline estimate (torchneuron/profiler/roofline.py) adds per kernel.
    kernel_launch_s: float
    # The kernel estimate's model of the Vector, Scalar and GpSimd Engines
    # (torchneuron/kernels/library/estimate.py): one element per partition per cycle at this
    # clock, plus a fixed number of cycles to issue each instruction.
    engine_clock_hz: float
    engine_instruction_overhead_cycles: int

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
        # AWS "Amazon EC2 Trn2 instances" page: trn2.48xlarge (16 chips) 2.9 dense FP32 PFLOPS.
        peak_fp32_flops_per_chip=181e12,
        max_chips=16,
        # NKI "Trainium2 Architecture Guide" (https://awsdocs-neuron.readthedocs-hosted.com/en/
        # latest/nki/guides/architecture/trainium2_arch.html): SBUF 28 MiB = 128 partitions of
        # 224 KiB, PSUM 2 MiB = 128 partitions of 16 KiB in 8 banks of 2 KiB;
        # nki.isa.nc_matmul: moving free size <= 512 on NeuronCore-v2/v3 (one PSUM bank of fp32).
        nc_version="gen3",
        partitions=128,
        sbuf_bytes_per_partition=224 * 1024,
        psum_bytes_per_partition=16 * 1024,
        psum_banks=8,
        matmul_moving_fmax=512,
        # No public per-kernel launch figure exists for NeuronCores; 2 us is an assumption of the
        # order of CUDA's kernel launch latency (NVIDIA's CUDA C++ Best Practices Guide puts
        # launch overhead in the microseconds), stated as such in docs/profiler.md.
        kernel_launch_s=2e-6,
        # Assumptions, not published figures: AWS's NeuronCore-v3 and Trainium2 architecture
        # pages give the chip's and the Tensor Engine's FLOP/s but no clock or per-instruction
        # issue cost for the Vector, Scalar and GpSimd Engines. 1.4 GHz and 64 cycles are the
        # estimate's working figures, kept here so that every estimate reads them from the one
        # table of device facts; docs/kernels.md states them as assumptions.
        engine_clock_hz=1.4e9,
        engine_instruction_overhead_cycles=64,
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
        # No FP32 figure is published for Trainium3: assumed to keep trn2's FP32:BF16 ratio
        # (181:667), an assumption the estimate's documentation (docs/profiler.md) repeats.
        peak_fp32_flops_per_chip=671e12 * 181 / 667,
        max_chips=16,
        # NKI "Trainium3 Architecture Guide" (https://awsdocs-neuron.readthedocs-hosted.com/en/
        # latest/nki/about/trainium3_arch.html): SBUF 32 MiB (128 x 256 KiB), PSUM unchanged at
        # 2 MiB; nki.isa.nc_matmul: moving free size up to 4096 for a float32 dst (8 PSUM banks)
        # on NeuronCore-v4.
        nc_version="gen4",
        partitions=128,
        sbuf_bytes_per_partition=256 * 1024,
        psum_bytes_per_partition=16 * 1024,
        psum_banks=8,
        matmul_moving_fmax=4096,
        # No public per-kernel launch figure exists for NeuronCores; 2 us is an assumption of the
        # order of CUDA's kernel launch latency (NVIDIA's CUDA C++ Best Practices Guide puts
        # launch overhead in the microseconds), stated as such in docs/profiler.md.
        kernel_launch_s=2e-6,
        # trn2's assumptions, unchanged (nothing published for NeuronCore-v4 either).
        engine_clock_hz=1.4e9,
        engine_instruction_overhead_cycles=64,
    ),
}

DEFAULT_PROFILE = "trn2"
