"""NKI on the software NeuronCore: `nki.jit`, `nki.language` and `nki.isa`, written from AWS's
public NKI documentation (NKI 0.8, Neuron SDK 2.34) and run by an interpreter over CPU views of
device memory. Imported as `nki` where AWS's real package is not installed (see
torchneuron/import_names.py).

The API:
- `jit.py`: `@nki.jit`, a kernel called with tensors runs on the software NeuronCore.
- `execute.py`: `nki.execute`, a kernel run on the `neuron` device from NumPy arrays (NKI 0.8).
- `multi_rank.py`: `nki.multi_rank_simulate`, a kernel run as several ranks (NKI 0.8).
- `compile_config.py`: `nki.compiler`: CompileConfig and Allocation, `@nki.jit(compile_config=)`.
- `language.py`: `nki.language`: dtypes, memories, tile sizes, loops, SPMD ids (its namespace).
- `creation.py`: nki.language's tensor creation (ndarray, zeros, full, shared_constant, ...).
- `high_level_ops.py`: nki.language's operations that return new tiles (nl.add, nl.sum, nl.load).
- `isa.py`: `nki.isa`, the instructions (destination-passing), and those refused.
- `typing.py`: `nki.typing`, the names kernels annotate their parameters with.
- `collectives.py`: `nki.collectives`: a world of one rank, or multi_rank_simulate's ranks.
- `collectives_ranks.py`: the collectives between the ranks of nki.multi_rank_simulate.
- `lnc.py`: `nki.lnc`, the exchanges and barrier between the two cores of a `kernel[2]` launch.
- `objects.py`: `nl.NKIObject`, the base of the objects kernels take as arguments.
- `ops.py`: the math operators and activation functions, both `op=` and high-level functions.
- `dtypes.py`: the data types, how each is held in memory, and the casts between them.
- `errors.py`: the errors a kernel gets, each naming the rule it broke.

The instructions (`isa.py` gathers them):
- `isa_common.py`: helpers the instructions share (operands, the engines' memory rules).
- `isa_enums.py`: the configuration enums (engines, accumulator commands, DMA modes, targets).
- `isa_elementwise.py`: the element-wise instructions of the Vector, Scalar and GpSimd Engines.
- `isa_activate2.py`: `nisa.activate2`, the Scalar Engine's three-stage pipeline.
- `isa_tensor_engine.py`: the Tensor Engine: nc_matmul and nc_transpose.
- `isa_memory.py`: data movement: DMA copies and transposes, tensor_copy, memset.
- `isa_dma_compute.py`: `nisa.dma_compute`, the arithmetic inside the DMA engines.
- `isa_gather.py`: GpSimd gathers inside SBUF (nc_n_gather, local_gather).
- `isa_reduce.py`: reductions (free axes, across partitions, bn_stats/bn_aggr, max8).
- `isa_scan.py`: scans along each partition (cumulative, sequence bounds, nonzero).
- `isa_select.py`: Vector Engine selection and search (range_select, find/match-replace 8).
- `isa_shuffle.py`: `nisa.nc_stream_shuffle`, the cross-partition move inside quadrants.

The machine the interpreter models:
- `context.py`: the state of one kernel run (limits, live SBUF/PSUM, program ids, registers).
- `rules.py`: the NeuronCore's limits from the profile table and the checks instructions share.
- `buffers.py`: the memories (sbuf, psum, hbm, shared_hbm) and the storage behind a tensor.
- `tensor.py`: `NkiTensor`, a view on a storage, and the language guide's view operations.
- `views.py`: the targeted views of the newest reference (flatten_dims, rearrange, ...).
- `indirect.py`: indirect access patterns, the dynamic addressing of DMA gathers and scatters.
- `tensor_indirection.py`: `NkiTensor.indirect`, NeuronCore-v4 column gathers and scatters of
  the compute engines at offsets read from SBUF.
- `placement.py`: where on-chip tensors live inside a partition (byte ranges).
- `registers.py`: engine registers (deprecated by NKI 0.8) and `nl.dynamic_range` loops.
- `scalars.py`: NKI 0.8's device scalars: `nisa.NkiScalar`, scalar_load/store, scalar_alu.
- `control_flow.py`: `nl.fori_loop`, `nl.while_loop` and `nl.if_else` on device scalars.
- `cores.py`: the multi-core model (one program per core, barriers, sendrecv).
- `turns.py`: the turn-taking of multi-program runs (the cores of a launch, the ranks of
  nki.multi_rank_simulate): one thread each, one running at a time, in a fixed order.
- `ranks.py`: the multi-rank world (one thread per rank, the collectives' rendezvous).
- `arguments.py`: a kernel's arguments and results as HBM tensors and back.
- `host_threads.py`: a kernel runs with an OpenMP team of one on its own thread."""

from . import collectives, isa, language, lnc, typing  # noqa: F401
from .dtypes import NkiDtype as dtype  # noqa: F401  (annotations: `compute_dtype: nki.dtype`)
from .errors import NkiError, NkiUnsupportedError, NkiValidationError  # noqa: F401
from .jit import Kernel, jit, simulate  # noqa: F401
from . import compile_config as compiler  # noqa: F401  (nki.compiler.CompileConfig)
from .compile_config import Allocation, CompileConfig  # noqa: F401
from .execute import execute  # noqa: F401
from .multi_rank import multi_rank_simulate  # noqa: F401

__version__ = "0.8.0+torchneuron"
