"""The configuration enums of nki.isa (engines, accumulator commands, DMA modes, targets)."""

from enum import Enum


class engine(Enum):
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    dma = "dma"
    sync = "sync"
    unknown = "unknown"


class reduce_cmd(Enum):
    idle = "idle"
    reset = "reset"
    reduce = "reduce"
    reset_reduce = "reset_reduce"
    load_reduce = "load_reduce"


class dge_mode(Enum):
    unknown = "unknown"
    swdge = "swdge"
    hwdge = "hwdge"
    none = "none"


class oob_mode(Enum):
    error = "error"
    skip = "skip"


class matmul_perf_mode(Enum):
    none = "none"
    double_row = "double_row"


class nc_version(Enum):
    gen2 = "gen2"
    gen3 = "gen3"
    gen4 = "gen4"


class dma_engine(Enum):
    dma = "dma"
    gpsimd_dma = "gpsimd_dma"


# The older module-level names of the engines.
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown
