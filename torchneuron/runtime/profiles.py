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


# --- The time model's machines (torchneuron/timemodel/) ------------------------------------------
#
# What the time model needs to price a step on a machine it does not run on: per chip, the engine
# clocks and widths, HBM, the links between chips and between instances, and the fixed costs. A
# figure with a URL is published there; one marked ASSUMPTION has no public source and says what
# it stands on; one marked FITTED was chosen against the published cases of
# benchmarks/time_model.py, which names them, so that a reader can see that those cases check less.

TRN_ARCH = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/"
            "neuron-hardware/")
NKI_ARCH_V2 = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/architecture/"
               "trainium_inferentia2_arch.html")
NKI_ARCH_V3 = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/architecture/"
               "trainium2_arch.html")
NKI_PERF_GUIDE = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/"
                  "nki_perf_guide.html")
H100_DATASHEET = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
TNX_ATTENTION = ("https://github.com/aws-neuron/transformers-neuronx/blob/main/src/"
                 "transformers_neuronx/layers/attention.py")
NKI_ATTENTION_CTE = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/library/api/"
                     "attention-cte.html")


@dataclass(frozen=True)
class MachineProfile:
    name: str
    kind: str  # "neuron" (NeuronCores, priced per engine) or "gpu" (priced per SM wave)
    instance: str  # the instance type the figures describe
    chips_per_instance: int
    cores_per_chip: int  # physical NeuronCores (a GPU: 1)
    default_lnc: int  # physical cores per logical core (rank); a GPU: 1
    hbm_bytes_per_chip: int
    hbm_bandwidth_per_chip: float  # bytes/s
    peak_bf16_flops_per_chip: float  # dense
    peak_fp8_flops_per_chip: float
    peak_fp32_flops_per_chip: float
    # Tensor Engine (one physical core): a `array` x `array` systolic array at `tensor_clock_hz`;
    # one MultiplyMoving instruction streams up to `moving_tile` columns and costs
    # max(columns, matmul_min_cycles) cycles (x fp32_matmul_factor for float32 inputs).
    # A GPU: `array` is the output tile of one SM's matmul and `sms` the SMs sharing a wave.
    array: int
    tensor_clock_hz: float
    moving_tile: int
    matmul_min_cycles: int
    fp32_matmul_factor: int
    sms: int
    # Vector and Scalar Engines (one physical core): `vector_lanes` elements per cycle (float32;
    # bf16_vector_factor more for 16-bit data), plus a fixed cost per instruction.
    vector_clock_hz: float
    scalar_clock_hz: float
    vector_lanes: int
    bf16_vector_factor: int
    instruction_overhead_cycles: int
    # On-chip memory of one physical core (SBUF; a GPU: its L2): in a compiled graph a tensor
    # that fits stays on chip between the ops that make and use it.
    on_chip_bytes: int
    # The share of peak a well-tuned kernel reaches: the time model divides by it.
    hbm_efficiency: float
    compute_efficiency: float
    # Links: chip to chip inside the instance, and the instance's network (EFA / InfiniBand).
    link_bandwidth_per_chip: float  # bytes/s, all of a chip's links together
    network_bandwidth_per_instance: float  # bytes/s
    link_step_s: float  # fixed cost of one step of a ring collective inside the instance
    network_step_s: float  # the same across instances
    # Fixed costs outside the engines.
    kernel_launch_s: float  # one eager kernel
    graph_launch_s: float  # one execution of a compiled graph (a NEFF / a CUDA graph)
    host_link_bandwidth: float  # bytes/s between host and one chip
    host_sync_s: float  # a host read of a device value (`.item()`): the queue drains
    # How the machine's inference stack runs a prompt's attention (torchneuron/timemodel/
    # price.py, ATTENTION_KINDS): "flash" (a fused kernel, scores kept on chip) or
    # "materialized" (the score matrix computed whole and passed through HBM op by op).
    prefill_attention: str
    sources: tuple[str, ...]

    def logical_cores_per_chip(self, lnc: int | None = None) -> int:
        return self.cores_per_chip // (lnc or self.default_lnc)

    def ranks_per_instance(self, lnc: int | None = None) -> int:
        return self.chips_per_instance * self.logical_cores_per_chip(lnc)


_TRN2 = PROFILES["trn2"]
_TRN3 = PROFILES["trn3"]

# ASSUMPTIONS shared by the Trainium machines (no public figure exists for them):
# - 2 us per eager kernel: the profile table's kernel_launch_s (see ChipProfile above).
# - 20 us per compiled-graph execution: the order of a CUDA graph launch plus the runtime's
#   queueing; neither AWS nor NVIDIA publish it for these parts.
# - 64 GB/s host link: a PCIe Gen5 x16 link's nominal figure (PCI-SIG), Trainium2's host link
#   generation is not published; 32 GB/s (Gen4) for Trainium1.
# - 50 us per host sync: the order of a round trip through a device queue and the host link.
_ASSUMED_GRAPH_LAUNCH_S = 20e-6
_ASSUMED_HOST_SYNC_S = 50e-6


def _neuroncore_v3_machine(chip: ChipProfile, instance: str, link_bandwidth_per_chip: float,
                           sources: tuple[str, ...]) -> MachineProfile:
    """A Trainium2 or Trainium3 instance: the chip's figures from its device profile
    (PROFILES), the rest shared by the two generations.
    NKI_ARCH_V3: Tensor 2.4 GHz, Vector 0.96 GHz (4x the lanes for BF16/FP16 in its performance
    mode: 512 vs 128 elements/cycle), Scalar 1.2 GHz. MM cost and FP32 factor as NeuronCore-v2
    (the v3 guide describes only what changed); Trainium3 assumes Trainium2's (nothing
    published for NeuronCore-v4). Amazon EC2 Trn2 page: 3.2 Tbps EFAv3 per instance, assumed
    for Trn3 too. Link and network steps: Trainium1's figures (FITTED there, an ASSUMPTION
    here): nothing published per step. NKI_ATTENTION_CTE: a prompt's attention runs as the NKI
    library's context-encoding kernel (flash attention for long sequences)."""
    return MachineProfile(
        name=chip.name, kind="neuron", instance=instance, chips_per_instance=chip.max_chips,
        cores_per_chip=chip.neuron_cores_per_chip, default_lnc=chip.default_logical_nc_config,
        hbm_bytes_per_chip=chip.hbm_bytes_per_chip,
        hbm_bandwidth_per_chip=chip.hbm_bandwidth_bytes_per_s,
        peak_bf16_flops_per_chip=chip.peak_bf16_flops_per_chip,
        peak_fp8_flops_per_chip=chip.peak_fp8_flops_per_chip,
        peak_fp32_flops_per_chip=chip.peak_fp32_flops_per_chip,
        array=chip.partitions, tensor_clock_hz=2.4e9, moving_tile=chip.matmul_moving_fmax,
        matmul_min_cycles=64, fp32_matmul_factor=4, sms=1,
        vector_clock_hz=0.96e9, scalar_clock_hz=1.2e9, vector_lanes=128, bf16_vector_factor=4,
        instruction_overhead_cycles=100,
        on_chip_bytes=chip.partitions * chip.sbuf_bytes_per_partition,
        hbm_efficiency=0.6, compute_efficiency=0.9,
        link_bandwidth_per_chip=link_bandwidth_per_chip,
        network_bandwidth_per_instance=3.2e12 / 8,
        link_step_s=0.75e-6, network_step_s=7.5e-6,
        kernel_launch_s=chip.kernel_launch_s, graph_launch_s=_ASSUMED_GRAPH_LAUNCH_S,
        host_link_bandwidth=64e9, host_sync_s=_ASSUMED_HOST_SYNC_S,
        prefill_attention="flash", sources=sources)


MACHINES: dict[str, MachineProfile] = {
    # Trainium1 (trn1.32xlarge): TRN_ARCH trainium.html: 2 NeuronCore-v2 per chip, 190 BF16 and
    # 47.5 FP32 TFLOPS, 32 GiB HBM at 820 GB/s per chip; trn1-arch.html: 16 chips, 800 Gbps EFA;
    # trainium2.html's comparison table: 384 GB/s of NeuronLink per Trainium1 chip.
    # NKI_ARCH_V2: Tensor Engine 128x128 at 2.8 GHz, MM cost max(N, 64) cycles, FP32 4x;
    # Vector 1.12 GHz, Scalar 1.4 GHz, 128 lanes; 100 cycles static overhead per instruction.
    "trn1": MachineProfile(
        name="trn1", kind="neuron", instance="trn1.32xlarge", chips_per_instance=16,
        cores_per_chip=2, default_lnc=1, hbm_bytes_per_chip=32 * GiB,
        hbm_bandwidth_per_chip=820e9, peak_bf16_flops_per_chip=190e12,
        peak_fp8_flops_per_chip=190e12, peak_fp32_flops_per_chip=47.5e12,
        array=128, tensor_clock_hz=2.8e9, moving_tile=512, matmul_min_cycles=64,
        fp32_matmul_factor=4, sms=1,
        vector_clock_hz=1.12e9, scalar_clock_hz=1.4e9, vector_lanes=128, bf16_vector_factor=1,
        instruction_overhead_cycles=100, on_chip_bytes=24 * 1024 * 1024,  # NKI_ARCH_V2: 24 MiB
        # NKI_PERF_GUIDE: "memory-bound ... MBU close to 100% (60%+ is considered good)",
        # "compute-bound ... 90%+ is considered good".
        hbm_efficiency=0.6, compute_efficiency=0.9,
        link_bandwidth_per_chip=384e9, network_bandwidth_per_instance=800e9 / 8,
        # FITTED: 0.75 us per ring step makes the trn1 Llama-2-70B TPOT case's collectives (160
        # all-reduces of 32 ranks a token) what the case leaves after its weights are read.
        link_step_s=0.75e-6,
        # ASSUMPTION: a step across instances costs an EFA round trip, ~10x a NeuronLink step.
        network_step_s=7.5e-6,
        kernel_launch_s=_TRN2.kernel_launch_s, graph_launch_s=_ASSUMED_GRAPH_LAUNCH_S,
        host_link_bandwidth=32e9, host_sync_s=_ASSUMED_HOST_SYNC_S,
        # TNX_ATTENTION: transformers-neuronx (the stack of the Trn1 inference tables, Neuron
        # 2.18) encodes a prompt with context_combined: the whole score matrix, then the softmax
        # op by op. Its source today also holds an NKI flash kernel, used from 4096 tokens up;
        # the Neuron 2.18 figures take as long per score at 4096 and 8192 tokens as at 2048
        # (docs/time-model.md), so they were measured without it.
        prefill_attention="materialized",
        sources=(TRN_ARCH + "trainium.html", TRN_ARCH + "trn1-arch.html",
                 TRN_ARCH + "trainium2.html", NKI_ARCH_V2, NKI_PERF_GUIDE, TNX_ATTENTION),
    ),
    # Trainium2 (trn2.48xlarge): chip figures from the device profile above (PROFILES["trn2"]);
    # TRN_ARCH trainium2.html: NeuronLink-v3 1.28 TB/s per chip; Amazon EC2 Trn2 page
    # (https://aws.amazon.com/ec2/instance-types/trn2/): 3.2 Tbps EFAv3 per trn2.48xlarge.
    "trn2": _neuroncore_v3_machine(
        _TRN2, instance="trn2.48xlarge", link_bandwidth_per_chip=1.28e12,
        sources=(TRN_ARCH + "trainium2.html", "https://aws.amazon.com/ec2/instance-types/trn2/",
                 NKI_ARCH_V3, NKI_PERF_GUIDE, NKI_ATTENTION_CTE)),
    # Trainium3: chip figures from PROFILES["trn3"]; TRN_ARCH trainium3.html: NeuronLink-v4
    # 2.56 TB/s per chip. ASSUMPTIONS: engine clocks, network and fixed costs as Trainium2 (no
    # NeuronCore-v4 engine clock or Trn3 EFA figure was found published).
    "trn3": _neuroncore_v3_machine(
        _TRN3, instance="trn3 (16 chips)", link_bandwidth_per_chip=2.56e12,
        sources=(TRN_ARCH + "trainium3.html", NKI_ATTENTION_CTE)),
    # NVIDIA H100 SXM5 80GB (a p5.48xlarge / DGX H100 of 8): H100_DATASHEET: 989 dense BF16
    # TFLOPS (1979 with sparsity), 1979 dense FP8, 67 FP32 TFLOPS, 80 GB HBM3 at 3.35 TB/s, NVLink
    # 900 GB/s; NVIDIA H100 Tensor Core GPU Architecture whitepaper
    # (https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper): 132 SMs, 128
    # FP32 lanes each (67 TFLOPS / (2 x 132 x 128) = 1.98 GHz). p5.48xlarge
    # (https://aws.amazon.com/ec2/instance-types/p5/): 3200 Gbps EFA.
    # The tensor term: 128x128 output tiles, one per SM per wave, each at peak / 132.
    "h100": MachineProfile(
        name="h100", kind="gpu", instance="8x H100 SXM (p5.48xlarge)", chips_per_instance=8,
        cores_per_chip=1, default_lnc=1, hbm_bytes_per_chip=80 * 10**9,
        hbm_bandwidth_per_chip=3.35e12, peak_bf16_flops_per_chip=989e12,
        peak_fp8_flops_per_chip=1979e12, peak_fp32_flops_per_chip=67e12,
        array=128, tensor_clock_hz=1.98e9, moving_tile=128, matmul_min_cycles=0,
        fp32_matmul_factor=1, sms=132,
        vector_clock_hz=1.98e9, scalar_clock_hz=1.98e9, vector_lanes=132 * 128,
        bf16_vector_factor=1, instruction_overhead_cycles=0,
        on_chip_bytes=50 * 1024 * 1024,  # H100_DATASHEET / whitepaper: 50 MB L2
        # ASSUMPTIONS: the same shares as Trainium's (NKI_PERF_GUIDE), no NVIDIA figure.
        hbm_efficiency=0.6, compute_efficiency=0.9,
        link_bandwidth_per_chip=900e9, network_bandwidth_per_instance=3.2e12 / 8,
        # ASSUMPTIONS: NVLink and network ring steps as Trainium's; a CUDA kernel launch of the
        # order the CUDA C++ Best Practices Guide gives (microseconds).
        link_step_s=0.75e-6, network_step_s=7.5e-6,
        kernel_launch_s=_TRN2.kernel_launch_s, graph_launch_s=_ASSUMED_GRAPH_LAUNCH_S,
        host_link_bandwidth=64e9, host_sync_s=_ASSUMED_HOST_SYNC_S,
        prefill_attention="flash",  # PyTorch's SDPA picks its flash backend on Hopper
        sources=(H100_DATASHEET, "https://resources.nvidia.com/en-us-tensor-core/"
                 "gtc22-whitepaper-hopper", "https://aws.amazon.com/ec2/instance-types/p5/"),
    ),
}
