"""Configuration from the environment. This is the only module that reads environment variables;
each one is listed in the README.

  NEURON_PROFILE             device generation: trn2 (default) or trn3
  NEURON_LOGICAL_NC_CONFIG   physical NeuronCores per device (LNC): 1 or 2 (default: profile's)
  NEURON_RT_VISIBLE_CORES    logical cores this process sees, e.g. "0-3" or "0,2"
                             (default: all cores of one chip)
  NEURON_HBM_BYTES           HBM capacity per device, e.g. 8GiB, 512MiB or 1073741824
                             (default: the profile's)
  NEURON_FLOAT64             float64 and complex128 arithmetic, which Trainium lacks: warn
                             (default: computes as the CPU does, a host fallback as on
                             TorchNeuron, and warns once per op), error (refuses, naming the op)
                             or allow (computes without a warning)
  NEURON_DIST_CHECK          before each collective on neuron tensors, check that all ranks
                             pass the same shapes (one fingerprint exchange): 1 (default) or 0
  NEURON_COMPILE_GEMM        matmul kernels in compiled graphs: onednn (default) or aten (the
                             CPU's ATen kernels, as in eager mode)
  NEURON_OOM_SNAPSHOT        file to write a memory snapshot to on torch.OutOfMemoryError
                             ("%p" becomes the process id); records allocator history from the
                             first device use (default: unset, no snapshot)
  NEURON_KERNEL_MODE         the kernel library's ops (torchneuron.kernels): fast (default,
                             composite ops) or simulate (their NKI kernels on the simulator)
  NEURON_EAGER_MODE          how eager ops execute: async (default: queued per stream, run by
                             the device's workers; errors surface at the next synchronization),
                             sync (each op completes before the call returns) or fused (async,
                             and hot chains of queued pointwise ops run as one generated
                             kernel); TorchTPU's names debug (= sync) and strict (= async) too
  NEURON_LAUNCH_BLOCKING     1: every op completes before its call returns, in any mode (as
                             CUDA_LAUNCH_BLOCKING); 0 (default)
  NEURON_MEMORY_PROTECT      1: the memory-protected runtime (csrc/runtime/ProtectedMemory.h):
                             synchronous, device memory inaccessible to the host except while
                             a kernel, a copy or a collective runs through the runtime seam;
                             any other access stops the process naming the address (a check
                             that nothing bypasses the seam); 0 (default)
  NEURON_FUSION_HOT          fused eager: a chain of queued ops is compiled once seen this many
                             times (default: 20: a compile costs 1-3 s of a core, a fused chain
                             saves well under a millisecond per run, so only chains a loop
                             repeats pay it back)
  NEURON_RNG                 what random ops on neuron draw from: device (default: each
                             device's own generator, as CUDA's) or cpu (the CPU's default
                             generator itself, to check a seeded port against the CPU bit for bit)
  NEURON_ACCOUNTING          1: the readiness accounting (host fallbacks, host syncs, shape
                             signatures, recompiles, peak memory: torch.neuron.readiness_summary())
                             on from the first device use, with a summary on stderr at exit;
                             0 (default: on only inside torch.neuron.expect and the readiness
                             command)
  NEURON_EXPECT              a contract for the whole run, e.g. "syncs=0,host_fallbacks=0,
                             peak_memory=20GiB" (keys: host_fallbacks, syncs, recompiles,
                             signatures, dynamic_shapes, peak_memory): turns the accounting on;
                             a script exits with status 1 naming each violation, a pytest run
                             checks every test (default: unset)
  TORCH_FR_BUFFER_SIZE       PyTorch's flight recorder: entries kept per process (PyTorch reads
                             it too); 0 turns the recorder and the neuron backend's dumps off
                             (default: 2000)
  TORCH_FR_DUMP_TEMP_FILE    where the neuron backend writes a flight-recorder dump, with the
                             global rank appended (default: PyTorch's, /tmp/nccl_trace_rank_)
"""

from __future__ import annotations

import os
import threading
import re
from dataclasses import dataclass

from .profiles import DEFAULT_PROFILE, PROFILES, ChipProfile

_UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
FLOAT64_POLICIES = ("warn", "error", "allow")
COMPILE_GEMMS = ("onednn", "aten")
KERNEL_MODES = ("fast", "simulate")
EAGER_MODES = ("sync", "async", "fused")
RNG_SOURCES = ("device", "cpu")
EAGER_MODE_ALIASES = {"debug": "sync", "strict": "async"}  # TorchTPU's names
# What torch.neuron.expect (and NEURON_EXPECT) may bound: counts, and peak memory in bytes.
EXPECTATION_KEYS = ("host_fallbacks", "syncs", "recompiles", "signatures", "dynamic_shapes",
                    "peak_memory")


_MAX_BYTES = 1 << 63  # the runtime counts bytes in 64 bits


class ConfigError(ValueError):
    """An environment variable holds a value torchneuron cannot use."""


@dataclass(frozen=True)
class Config:
    profile: ChipProfile
    logical_nc_config: int
    visible_cores: tuple[int, ...]
    hbm_bytes_per_device: int
    float64_policy: str
    dist_check: bool = True
    compile_gemm: str = "onednn"
    oom_snapshot: str | None = None
    kernel_mode: str = "fast"
    eager_mode: str = "async"
    launch_blocking: bool = False
    fusion_hot: int = 20
    rng: str = "device"
    fr_buffer_size: int = 2000
    fr_dump_prefix: str = "/tmp/nccl_trace_rank_"
    accounting: bool = False
    expect: tuple[tuple[str, int], ...] = ()  # NEURON_EXPECT's bounds, in its order
    memory_protect: bool = False

    @property
    def device_count(self) -> int:
        return len(self.visible_cores)


def _bad(var: str, value: str, accepted: str) -> ConfigError:
    return ConfigError(f"{var}={value!r} is not valid; accepted values: {accepted}")


def parse_bytes(var: str, value: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
    if not m or m.group(2).upper() not in _UNITS:
        raise _bad(var, value, "a byte count such as 1073741824, 512MiB or 8GiB")
    n = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if n <= 0 or n >= _MAX_BYTES:
        raise _bad(var, value, "a positive byte count below 2**63")
    return n


def parse_cores(var: str, value: str, limit: int) -> tuple[int, ...]:
    cores: list[int] = []
    accepted = f"core indices in [0, {limit - 1}] as a list or ranges, e.g. '0-3' or '0,2'"
    for part in value.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise _bad(var, value, accepted)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo or hi >= limit:
            raise _bad(var, value, accepted)
        cores.extend(range(lo, hi + 1))
    if len(set(cores)) != len(cores):
        raise _bad(var, value, accepted + " (each core once)")
    return tuple(cores)


def parse_expectations(var: str, text: str) -> tuple[tuple[str, int], ...]:
    """NEURON_EXPECT's "key=bound,..." as (key, bound) pairs; peak_memory takes a byte count
    (20GiB), the others a whole number of events."""
    accepted = ("comma-separated key=bound pairs, keys " + ", ".join(EXPECTATION_KEYS) +
                ", e.g. 'syncs=0,peak_memory=20GiB'")
    bounds: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in EXPECTATION_KEYS or key in bounds:
            raise _bad(var, text, accepted)
        if key == "peak_memory":
            bounds[key] = parse_bytes(var, value)
        elif value.strip().isdigit():
            bounds[key] = int(value)
        else:
            raise _bad(var, text, accepted)
    if not bounds:
        raise _bad(var, text, accepted)
    return tuple(bounds.items())


def load(environ: os._Environ | dict | None = None) -> Config:
    env = os.environ if environ is None else environ
    name = env.get("NEURON_PROFILE", DEFAULT_PROFILE)
    if name not in PROFILES:
        raise _bad("NEURON_PROFILE", name, ", ".join(sorted(PROFILES)))
    profile = PROFILES[name]

    lnc_text = env.get("NEURON_LOGICAL_NC_CONFIG", str(profile.default_logical_nc_config))
    if lnc_text.strip() not in ("1", "2"):
        raise _bad("NEURON_LOGICAL_NC_CONFIG", lnc_text, "1, 2")
    lnc = int(lnc_text)

    per_chip = profile.logical_cores_per_chip(lnc)
    if "NEURON_RT_VISIBLE_CORES" in env:
        cores = parse_cores("NEURON_RT_VISIBLE_CORES", env["NEURON_RT_VISIBLE_CORES"],
                            per_chip * profile.max_chips)
    else:
        cores = tuple(range(per_chip))

    if "NEURON_HBM_BYTES" in env:
        hbm = parse_bytes("NEURON_HBM_BYTES", env["NEURON_HBM_BYTES"])
    else:
        hbm = profile.hbm_bytes_per_device(lnc)

    f64 = env.get("NEURON_FLOAT64", "warn").strip().lower()
    if f64 not in FLOAT64_POLICIES:
        raise _bad("NEURON_FLOAT64", env["NEURON_FLOAT64"], ", ".join(FLOAT64_POLICIES))

    dist_check_text = env.get("NEURON_DIST_CHECK", "1").strip()
    if dist_check_text not in ("0", "1"):
        raise _bad("NEURON_DIST_CHECK", dist_check_text, "1, 0")

    gemm = env.get("NEURON_COMPILE_GEMM", "onednn").strip().lower()
    if gemm not in COMPILE_GEMMS:
        raise _bad("NEURON_COMPILE_GEMM", env["NEURON_COMPILE_GEMM"], ", ".join(COMPILE_GEMMS))

    oom_snapshot = env.get("NEURON_OOM_SNAPSHOT", "").strip() or None

    kernel_mode = env.get("NEURON_KERNEL_MODE", "fast").strip().lower()
    if kernel_mode not in KERNEL_MODES:
        raise _bad("NEURON_KERNEL_MODE", env["NEURON_KERNEL_MODE"], ", ".join(KERNEL_MODES))

    eager_mode = env.get("NEURON_EAGER_MODE", "async").strip().lower()
    eager_mode = EAGER_MODE_ALIASES.get(eager_mode, eager_mode)
    if eager_mode not in EAGER_MODES:
        raise _bad("NEURON_EAGER_MODE", env["NEURON_EAGER_MODE"],
                   ", ".join((*EAGER_MODES, *EAGER_MODE_ALIASES)))

    blocking_text = env.get("NEURON_LAUNCH_BLOCKING", "0").strip()
    if blocking_text not in ("0", "1"):
        raise _bad("NEURON_LAUNCH_BLOCKING", blocking_text, "0, 1")

    protect_text = env.get("NEURON_MEMORY_PROTECT", "0").strip()
    if protect_text not in ("0", "1"):
        raise _bad("NEURON_MEMORY_PROTECT", protect_text, "0, 1")

    hot_text = env.get("NEURON_FUSION_HOT", "20").strip()
    if not hot_text.isdigit() or int(hot_text) < 1:
        raise _bad("NEURON_FUSION_HOT", hot_text, "a whole number of times, at least 1")

    rng = env.get("NEURON_RNG", "device").strip().lower()
    if rng not in RNG_SOURCES:
        raise _bad("NEURON_RNG", env["NEURON_RNG"], ", ".join(RNG_SOURCES))

    accounting_text = env.get("NEURON_ACCOUNTING", "0").strip()
    if accounting_text not in ("0", "1"):
        raise _bad("NEURON_ACCOUNTING", accounting_text, "0, 1")
    expect_text = env.get("NEURON_EXPECT", "").strip()
    expect = parse_expectations("NEURON_EXPECT", expect_text) if expect_text else ()

    # PyTorch's names and defaults (torch/csrc/distributed/c10d/FlightRecorder.hpp).
    fr_text = env.get("TORCH_FR_BUFFER_SIZE", "2000")
    if not fr_text.strip().isdigit():
        raise _bad("TORCH_FR_BUFFER_SIZE", fr_text, "a whole number of entries, 0 for off")
    fr_prefix = env.get("TORCH_FR_DUMP_TEMP_FILE", "/tmp/nccl_trace_rank_")

    return Config(profile, lnc, cores, hbm, f64, dist_check=dist_check_text == "1",
                  compile_gemm=gemm, oom_snapshot=oom_snapshot, kernel_mode=kernel_mode,
                  eager_mode=eager_mode, launch_blocking=blocking_text == "1",
                  fusion_hot=int(hot_text), rng=rng, fr_buffer_size=int(fr_text),
                  fr_dump_prefix=fr_prefix, accounting=accounting_text == "1", expect=expect,
                  memory_protect=protect_text == "1")


_lock = threading.Lock()
_outcome: Config | ConfigError | None = None


def current() -> Config:
    """This process's configuration: the environment, read and validated once, at the first call
    (load() re-reads it). A bad value raises ConfigError then and at every later call, also
    after the environment changed: the process keeps the configuration it started with."""
    global _outcome
    with _lock:
        if _outcome is None:
            try:
                _outcome = load()
            except ConfigError as e:
                _outcome = e
        outcome = _outcome
    if isinstance(outcome, ConfigError):
        raise ConfigError(str(outcome)) from None
    return outcome
