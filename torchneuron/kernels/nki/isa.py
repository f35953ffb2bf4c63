"""nki.isa: the NeuronCore's instructions, destination-passing (dst first), as the software
NeuronCore runs them. Instructions listed in UNSUPPORTED raise NkiUnsupportedError naming
themselves; docs/nki.md lists both sets."""

from __future__ import annotations

import functools

from . import context as _context
from . import isa_enums as constants  # noqa: F401  (nki.isa.constants)
from .context import current
from .errors import NkiUnsupportedError, NkiValidationError  # noqa: F401  (nisa.NkiValidationError)
from .isa_elementwise import (activation, activation_reduce, affine_select, dropout,  # noqa: F401
                              exponential, iota, reciprocal, scalar_tensor_tensor,
                              tensor_copy_predicated, tensor_scalar, tensor_tensor,
                              tensor_tensor_scan)
from .isa_enums import (dge_mode, dma_engine, engine, gpsimd_engine, matmul_perf_mode,  # noqa: F401
                        nc_version, oob_mode, reduce_cmd, scalar_engine, tensor_engine,
                        unknown_engine, vector_engine)
from .cores import core_barrier, sendrecv, sendrecv_compute  # noqa: F401
from .isa_select import (nc_find_index8, nc_match_replace8, range_select,  # noqa: F401
                         select_reduce)
from .isa_activate2 import activate2  # noqa: F401
from .isa_dma_compute import dma_compute  # noqa: F401
from .isa_gather import local_gather, nc_n_gather  # noqa: F401
from .isa_scan import (nonzero_with_count, sequence_bounds,  # noqa: F401
                       tensor_scalar_cumulative)
from .isa_shuffle import nc_stream_shuffle  # noqa: F401
from .isa_memory import (dma_copy, dma_transpose, memset, tensor_copy,  # noqa: F401
                         tensor_copy_dynamic_dst, tensor_copy_dynamic_src)
from .isa_reduce import (bn_aggr, bn_stats, max8, tensor_partition_reduce,  # noqa: F401
                         tensor_reduce, tensor_scalar_reduce)
from .isa_tensor_engine import nc_matmul, nc_transpose  # noqa: F401
from .registers import (VirtualRegister, register_alloc, register_load,  # noqa: F401
                        register_move, register_store)
from .scalars import NkiScalar, scalar_alu, scalar_load, scalar_store  # noqa: F401


def get_nc_version() -> nc_version:
    return nc_version[current().limits.nc_version]


UNSUPPORTED = {
    "nc_matmul_mx": "MX-format matmul (NeuronCore-v4 microscaling)",
    "quantize_mx": "MX quantization (NeuronCore-v4 microscaling)",
    "rng": "the engines' random number generator",
    "rand2": "the engines' random number generator",
    "rand_set_state": "the engines' random number generator",
    "rand_get_state": "the engines' random number generator",
    "set_rng_seed": "the engines' random number generator",
    "topk": "GpSimd top-K over a 16-partition snake layout, whose output placement is not "
            "documented",
}


def _unsupported(name: str, what: str):
    def instruction(*args, **kwargs):
        raise NkiUnsupportedError(f"nki.isa.{name} ({what}) is not supported by the software "
                                  "NeuronCore; docs/nki.md lists the instructions it runs")
    instruction.__name__ = name
    return instruction


for _name, _what in UNSUPPORTED.items():
    globals()[_name] = _unsupported(_name, _what)
del _name, _what


def counted(instruction):
    """Counts the instruction in its kernel run (Kernel.last_instructions, the simulator's
    benchmark reads it)."""
    @functools.wraps(instruction)
    def counted(*args, **kwargs):
        run = _context.active()
        if run is not None:
            run.instructions[0] += 1
        return instruction(*args, **kwargs)
    return counted


INSTRUCTIONS = ("dma_copy", "dma_transpose", "tensor_copy", "memset", "tensor_tensor",
                "tensor_scalar", "scalar_tensor_tensor", "tensor_tensor_scan", "activation",
                "activation_reduce", "tensor_reduce", "tensor_partition_reduce",
                "tensor_scalar_reduce", "nc_matmul", "nc_transpose", "iota", "affine_select",
                "reciprocal", "exponential", "bn_stats", "bn_aggr", "max8",
                "tensor_copy_predicated", "dropout", "range_select", "nc_find_index8",
                "nc_match_replace8", "nc_stream_shuffle", "core_barrier", "select_reduce",
                "sendrecv", "tensor_scalar_cumulative", "sequence_bounds",
                "nonzero_with_count", "activate2", "local_gather", "nc_n_gather",
                "dma_compute", "tensor_copy_dynamic_src", "tensor_copy_dynamic_dst",
                "sendrecv_compute")
for _name in INSTRUCTIONS:
    globals()[_name] = counted(globals()[_name])
del _name
