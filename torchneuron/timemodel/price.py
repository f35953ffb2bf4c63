"""Prices a trace (trace.py) on one rank of a machine, op by op, with the engine terms
(engines.py), the collectives (collectives.py) and the stalls.

Two ways a step can run:
  graph   the whole step is one compiled graph (what neuronx-cc, NxD Inference and vLLM on
          Neuron run): one launch per step; a tensor that fits on chip (SBUF, a GPU's L2) stays
          there between the ops that make and use it, so only resident tensors (weights, caches)
          and tensors larger than the on-chip memory cross HBM.
  eager   every op is a kernel of its own (torchneuron's eager mode): a launch per op, and every
          operand crosses HBM.
Host fallbacks (float64 ops, which Trainium runs on the host) and host reads of device values
(`.item()`) are stalls: the device waits while the operands cross the host link and back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..runtime.profiles import MachineProfile
from . import engines
from .collectives import collective_s
from .layout import Layout
from .trace import OpRecord, Trace

TNX_ATTENTION = ("https://github.com/aws-neuron/transformers-neuronx/blob/main/src/"
                 "transformers_neuronx/layers/attention.py")
TNX_SAMPLE = ("https://github.com/aws-neuron/aws-neuron-samples/blob/master/torch-neuronx/"
              "transformers-neuronx/inference/codellama-13b-16k-sampling.ipynb")

# Ops that only describe memory (views, metadata) or allocate it: no engine time.
FREE = {"view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute",
        "expand", "slice", "select", "unsqueeze", "squeeze", "detach", "alias", "as_strided",
        "split", "split_with_sizes", "unbind", "chunk", "lift_fresh", "empty", "empty_like",
        "empty_strided", "new_empty", "new_empty_strided", "unsafe_split", "view_as_real",
        "view_as_complex", "_to_copy_noop", "sym_size", "sym_stride", "is_same_size", "clone_"}
MATMULS = {"mm", "addmm", "bmm", "baddbmm"}
# Transcendental functions: the Scalar Engine's activation tables.
SCALAR = {"exp", "exp_", "sigmoid", "silu", "silu_", "gelu", "tanh", "rsqrt", "sqrt", "log",
          "log_softmax", "_log_softmax", "erf", "pow", "reciprocal", "sin", "cos",
          "silu_backward", "gelu_backward", "sigmoid_backward", "tanh_backward"}
SOFTMAX = {"_softmax", "_softmax_backward_data", "_log_softmax_backward_data"}
MOVES = {"copy_", "_to_copy", "clone", "contiguous", "cat", "stack", "index_select", "gather",
         "scatter", "index", "index_put_", "index_copy_", "index_copy", "embedding",
         "embedding_dense_backward", "fill_", "zero_", "zeros", "ones", "full", "zeros_like",
         "ones_like", "slice_scatter", "select_scatter", "constant_pad_nd", "repeat", "arange"}


@dataclass
class Priced:
    """The time of a trace on one rank, by where it went."""
    engines: engines.OpCost = field(default_factory=engines.OpCost)
    compute_s: float = 0.0  # sum over ops of each op's engine-bound time
    collective_s: float = 0.0
    stall_s: float = 0.0
    launch_s: float = 0.0
    flops: int = 0
    hbm_bytes: int = 0
    by_op: dict = field(default_factory=dict)  # op name -> seconds

    @property
    def seconds(self) -> float:
        return self.compute_s + self.collective_s + self.stall_s + self.launch_s

    def add(self, name: str, seconds: float) -> None:
        self.by_op[name] = self.by_op.get(name, 0.0) + seconds


def _hbm_bytes(op: OpRecord, machine: MachineProfile, lnc: int, graph: bool,
               weight_scale: float) -> int:
    """Bytes this op moves through HBM.

    Eager: every operand. A graph: the compiler fuses pointwise ops and reductions into the
    matmuls and attention around them and streams them tile by tile, so only matmuls and
    attention touch HBM: their resident operands (weights, caches) whole, the others only if
    they do not fit on chip. Either way an embedding reads the rows it gathers, not its table,
    and an in-place update of a cache writes its source, not all of the cache."""
    if op.name == "embedding":
        return sum(o.nbytes for o in op.outputs) + sum(o.nbytes for o in op.inputs[1:])
    inputs, outputs = op.inputs, op.outputs
    if op.name.endswith("_") and inputs and inputs[0].resident:
        # An in-place update of a cache or weight writes its source into HBM, not all of self.
        return sum(o.nbytes for o in inputs[1:] if o.numel > 1)
    matmul_like = op.name in MATMULS or _is_attention(op.name)
    if graph and not matmul_like:
        return 0
    on_chip = machine.on_chip_bytes * (lnc if machine.kind == "neuron" else 1)
    total = 0
    for o in inputs:
        if o.resident == "weight":
            total += int(o.nbytes * weight_scale)
        elif o.resident or not graph or o.nbytes > on_chip:
            total += o.nbytes
    for o in outputs:
        if not graph or o.nbytes > on_chip:
            total += o.nbytes
    return total


def _is_attention(name: str) -> bool:
    return "scaled_dot_product" in name or "flash_attention" in name


def _matmul_shape(op: OpRecord) -> tuple[int, int, int, int]:
    """(batch, m, k, n) of mm/addmm/bmm/baddbmm from its output and its last operand."""
    out = op.outputs[0].shape
    b_operand = op.inputs[-1].shape
    if op.name in ("bmm", "baddbmm"):
        return out[0], out[1], b_operand[-2], out[2]
    return 1, out[0], b_operand[0], out[1]


ATTENTION_KINDS = ("flash", "materialized")
# Materialized attention (no flash kernel): transformers-neuronx's context encoding
# (TNX_ATTENTION, context_combined and hlo.softmax) computes the whole score matrix S = Q K^T in
# float32, masks it, and runs the softmax op by op: reduce_max, subtract, exp, reduce_sum,
# divide, then casts the probabilities to the model's 16-bit type for P V. The samples the Trn1
# figures come from compile with NEURON_CC_FLAGS=-O1 (TNX_SAMPLE), so each op is taken to be
# its own pass. When the scores do not fit on chip, each pass crosses HBM; bytes per score:
#   S written (4), mask read+write (8), max read (4), subtract read+write (8), exp read+write
#   (8), sum read (4), divide read+write (8), cast read 4 + write 2 (6), P read by P V (2).
MATERIALIZED_BYTES_PER_SCORE = 4 + 8 + 4 + 8 + 8 + 4 + 8 + 6 + 2
# Vector Engine input passes over the scores (exp runs on the Scalar Engine): mask (2 inputs),
# max (1), subtract (2), sum (1), divide (2), cast (1).
MATERIALIZED_VECTOR_PASSES = 9
MATERIALIZED_VECTOR_INSTRUCTIONS = 6


def _materialized_attention(batch_heads: int, lq: int, d: int, lk: int, machine: MachineProfile,
                            lnc: int, dtype: torch.dtype) -> engines.OpCost:
    """Attention with its score matrix materialized (MATERIALIZED_BYTES_PER_SCORE): both
    matmuls over the whole square (the causal mask is applied to computed scores, nothing is
    skipped), the softmax's passes on the Vector and Scalar Engines, and the scores' trips
    through HBM when they do not fit on chip (the caller adds the Q, K, V and output bytes)."""
    scores = batch_heads * lq * lk
    on_chip = machine.on_chip_bytes * (lnc if machine.kind == "neuron" else 1)
    spilled = scores * MATERIALIZED_BYTES_PER_SCORE if scores * 4 > on_chip else 0
    return engines.OpCost(
        tensor=(engines.tensor_engine_s(lq, d, lk, machine, lnc, dtype, batch_heads)
                + engines.tensor_engine_s(lq, lk, d, machine, lnc, dtype, batch_heads)),
        scalar=engines.scalar_engine_s(scores, machine, lnc),
        vector=engines.vector_engine_s(scores, machine, lnc, MATERIALIZED_VECTOR_PASSES,
                                       torch.float32, MATERIALIZED_VECTOR_INSTRUCTIONS),
        dma=engines.dma_s(spilled, machine, lnc))


def _attention_cost(op: OpRecord, machine: MachineProfile, lnc: int,
                    attention: str = "flash") -> engines.OpCost:
    """Fused attention (flash): two matmuls per head on the Tensor Engine, the softmax's exp on
    the Scalar Engine; causal masking of a square problem skips half of both. `attention`
    "materialized": a forward pass over more than one query position runs as
    _materialized_attention instead (decode's single query row stays on chip either way)."""
    q, k = op.inputs[0].shape, op.inputs[1].shape
    if len(q) < 4:
        return engines.OpCost()
    batch_heads, lq, d, lk = q[0] * q[1], q[2], q[3], k[2]
    backward = "backward" in op.name
    if attention == "materialized" and not backward and lq > 1:
        return _materialized_attention(batch_heads, lq, d, lk, machine, lnc,
                                       op.inputs[0].dtype)
    passes = 2.5 if backward else 1.0  # backward: dQ, dK, dV and the recomputed scores
    causal = 0.5 if lq == lk and lq > 1 else 1.0
    dtype = op.inputs[0].dtype
    scores = engines.tensor_engine_s(lq, d, lk, machine, lnc, dtype, batch_heads)
    values = engines.tensor_engine_s(lq, lk, d, machine, lnc, dtype, batch_heads)
    exp = engines.scalar_engine_s(batch_heads * lq * lk, machine, lnc)
    return engines.OpCost(tensor=(scores + values) * passes * causal,
                          scalar=exp * passes * causal,
                          vector=engines.vector_engine_s(batch_heads * lq * lk, machine, lnc,
                                                         dtype=dtype) * passes * causal)


def op_cost(op: OpRecord, machine: MachineProfile, lnc: int, graph: bool = True,
            weight_scale: float = 1.0, attention: str = "flash") -> engines.OpCost:
    """The engine terms of one traced op on one rank (collectives and host ops excluded).
    `attention`: how attention runs, one of ATTENTION_KINDS (_attention_cost)."""
    name = op.name
    if name in FREE or not op.outputs and name not in MATMULS:
        return engines.OpCost()
    dma = engines.dma_s(_hbm_bytes(op, machine, lnc, graph, weight_scale), machine, lnc)
    out = op.outputs[0] if op.outputs else None
    if name in MATMULS:
        batch, m, k, n = _matmul_shape(op)
        dtype = op.inputs[-1].dtype
        # Weights stored narrower than they compute (int8 weights of a bf16 matmul) are cast on
        # the Vector Engine after their load, one pass over every weight element.
        dequant = sum(o.numel for o in op.inputs if o.resident == "weight") \
            if weight_scale < 1.0 else 0
        return engines.OpCost(tensor=engines.tensor_engine_s(m, k, n, machine, lnc, dtype, batch),
                              vector=engines.vector_engine_s(dequant, machine, lnc,
                                                             dtype=torch.int8), dma=dma)
    if _is_attention(name):
        cost = _attention_cost(op, machine, lnc, attention)
        cost.dma += dma
        return cost
    if name in MOVES:
        return engines.OpCost(dma=dma)
    elements = max((o.numel for o in op.inputs), default=0) if out is None else out.numel
    dtype = out.dtype if out is not None else torch.float32
    if name in SOFTMAX:
        n_in = op.inputs[0].numel
        return engines.OpCost(scalar=engines.scalar_engine_s(n_in, machine, lnc),
                              vector=engines.vector_engine_s(n_in, machine, lnc, 2, dtype, 3),
                              dma=dma)
    if name in SCALAR:
        return engines.OpCost(scalar=engines.scalar_engine_s(elements, machine, lnc), dma=dma)
    # Pointwise ops and reductions: the Vector Engine reads each input once.
    n_inputs = sum(1 for o in op.inputs if o.numel > 1)
    reduced = max((o.numel for o in op.inputs), default=elements)
    return engines.OpCost(vector=engines.vector_engine_s(max(elements, reduced), machine, lnc,
                                                         max(1, n_inputs), dtype), dma=dma)


def _host_stall_s(op: OpRecord, machine: MachineProfile) -> float:
    """A float64 op runs on the host: its operands cross the host link both ways; a read of a
    device value drains the queue."""
    if op.name == "_local_scalar_dense":
        return machine.host_sync_s
    moved = sum(o.nbytes for o in op.inputs + op.outputs)
    return machine.host_sync_s + moved / machine.host_link_bandwidth


def price(trace: Trace, machine: MachineProfile, layout: Layout, graph: bool = True,
          weight_scale: float = 1.0, attention: str = "flash") -> Priced:
    """The trace of one rank's work, priced on `machine` under `layout`. `weight_scale`: bytes
    of a stored weight per byte of its traced dtype (0.5: int8 weights traced as bf16).
    `attention`: one of ATTENTION_KINDS (_attention_cost)."""
    if attention not in ATTENTION_KINDS:
        raise ValueError(f"unknown attention {attention!r}: expected one of "
                         f"{', '.join(ATTENTION_KINDS)}")
    lnc = layout.check_on(machine)
    groups = {"tp": layout.tp, "dp": layout.dp, "fsdp": layout.fsdp, "pp": layout.pp}
    result = Priced()
    result.launch_s = machine.graph_launch_s if graph else 0.0
    for op in trace.ops:
        result.flops += op.flops
        if op.collective is not None:
            ranks = groups.get(op.group or "tp", 1)
            seconds = collective_s(op.collective, op.inputs[0].nbytes, ranks, machine, lnc)
            result.collective_s += seconds
            result.add(f"collective:{op.collective}:{op.group}", seconds)
            continue
        if op.host:
            seconds = _host_stall_s(op, machine)
            result.stall_s += seconds
            result.add(op.name + " (host)", seconds)
            continue
        cost = op_cost(op, machine, lnc, graph, weight_scale, attention)
        if cost.seconds == 0.0:
            continue
        if not graph:
            cost.fixed += machine.kernel_launch_s
        result.engines += cost
        result.compute_s += cost.seconds
        result.hbm_bytes += int(cost.dma * engines.hbm_bandwidth_per_rank(machine, lnc)
                                * machine.hbm_efficiency)
        result.add(op.name, cost.seconds)
    return result


def top_ops(priced: Priced, n: int = 8) -> list[tuple[str, float]]:
    return sorted(priced.by_op.items(), key=lambda kv: -kv[1])[:n]


def mfu(priced: Priced, machine: MachineProfile, layout: Layout,
        dtype: torch.dtype = torch.bfloat16) -> float:
    lnc = layout.lnc_on(machine)
    peak = engines.peak_flops_per_rank(machine, lnc, dtype)
    return priced.flops / peak / priced.seconds if priced.seconds else math.nan
