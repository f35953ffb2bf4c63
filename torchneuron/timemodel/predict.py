"""A step's predicted time: trace one rank's work at full size under FakeTensorMode, price it on
the machine under the layout, and add what the trace does not hold (pipeline bubbles, gradient
synchronization across data-parallel ranks and FSDP shards, the optimizer).

Workloads of a transformer (transformer.py):
  decode   one token for each of `batch` sequences, attending over a cache of `context` positions
           (the time per output token, TPOT);
  prefill  a prompt of `context` tokens for each of `batch` sequences, logits of the last
           position only (the time to first token, TTFT);
  train    forward, backward and AdamW over `batch` sequences of `context` tokens per data-parallel
           rank, in `microbatches` accumulation steps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from ..runtime.profiles import MachineProfile
from . import engines
from .collectives import collective_s
from .layout import Layout, machine_named
from .price import ATTENTION_KINDS, Priced, price
from .trace import Trace, trace
from .transformer import (RankModel, TransformerConfig, config_named, kv_caches,
                          rank_cache_bytes, rank_parameters)

WORKLOADS = ("decode", "prefill", "train")
# AdamW's update per parameter: reads the fp32 master weight, gradient and two moments, writes
# the weight and moments back, and writes the bf16 copy (NxD's BF16 + FP32-optimizer recipe).
_ADAMW_BYTES_PER_PARAM = 4 * 4 + 3 * 4 + 2
_ADAMW_VECTOR_PASSES = 12


@dataclass
class Prediction:
    model: str
    machine: str
    layout: Layout
    workload: str
    batch: int
    context: int
    seconds: float  # the step
    priced: Priced  # one traced pass (a microbatch) on one rank
    extra: dict = field(default_factory=dict)  # seconds outside the trace, by name
    trace_s: float = 0.0  # how long tracing took here
    ops: int = 0
    rank_bytes: int = 0  # what one rank keeps in HBM: weights, caches, optimizer state
    hbm_bytes_per_rank: int = 0

    @property
    def fits(self) -> bool:
        return self.rank_bytes <= self.hbm_bytes_per_rank

    @property
    def tokens_per_s(self) -> float:
        tokens = self.batch * (1 if self.workload == "decode" else self.context)
        if self.workload == "train":
            tokens *= self.layout.dp * self.extra.get("microbatches", 1)
        return tokens / self.seconds


def trace_transformer(cfg: TransformerConfig, tp: int, workload: str, batch: int, context: int,
                      layers: int | None = None, recompute: bool = False,
                      sequence_parallel: bool = False,
                      dtype: torch.dtype = torch.bfloat16) -> Trace:
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}: expected one of {', '.join(WORKLOADS)}")
    if batch < 1 or context < 1:
        raise ValueError(f"batch={batch} and context={context} must be positive")

    def build():
        return RankModel(cfg, tp, layers, dtype)

    def run(model: RankModel):
        if workload == "decode":
            caches = kv_caches(model, batch, context)
            tokens = torch.zeros(batch, 1, dtype=torch.long)
            position = torch.tensor([context - 1])
            with torch.no_grad():
                model(tokens, caches, position)
        elif workload == "prefill":
            with torch.no_grad():
                model(torch.zeros(batch, context, dtype=torch.long), last_only=True,
                      sequence_parallel=sequence_parallel)
        else:
            logits = model(torch.zeros(batch, context, dtype=torch.long), recompute=recompute)
            loss = torch.nn.functional.cross_entropy(
                logits.float().flatten(0, 1), torch.zeros(batch * context, dtype=torch.long))
            loss.backward()

    return trace(build, run)


def _optimizer_s(params: int, machine: MachineProfile, lnc: int) -> float:
    vector = engines.vector_engine_s(params * _ADAMW_VECTOR_PASSES, machine, lnc)
    return max(vector, engines.dma_s(params * _ADAMW_BYTES_PER_PARAM, machine, lnc))


def predict(model: str | TransformerConfig, machine: str | MachineProfile, layout: Layout,
            workload: str, batch: int, context: int, microbatches: int = 1,
            graph: bool = True, weight_bytes: float = 2.0, recompute: bool = False,
            sequence_parallel: bool = False, attention: str | None = None) -> Prediction:
    """The step time of `model` on `machine` (a MACHINES name) under `layout`. `weight_bytes`:
    bytes a stored weight element takes (2: bf16; 1: int8 weights). `recompute`: activation
    checkpointing per layer (training); `sequence_parallel`: the residual stream split over the
    tp ranks between layers (prefill). `attention` ("flash" or "materialized", price.py): how
    attention runs; by default a prefill runs as the machine's inference stack runs it
    (MachineProfile.prefill_attention) and training and decode as flash."""
    cfg = config_named(model) if isinstance(model, str) else model
    mach = machine_named(machine) if isinstance(machine, str) else machine
    lnc = layout.check_on(mach)
    if cfg.layers % layout.pp:
        raise ValueError(f"layout pp={layout.pp} does not divide {cfg.name}'s {cfg.layers} layers")
    if workload != "train" and (layout.pp > 1 or layout.fsdp > 1):
        raise ValueError("pp and fsdp layouts are for training; inference splits over tp only")
    if microbatches < 1:
        raise ValueError(f"microbatches={microbatches} must be positive")
    if attention is not None and attention not in ATTENTION_KINDS:
        raise ValueError(f"unknown attention {attention!r}: expected one of "
                         f"{', '.join(ATTENTION_KINDS)}")
    started = time.perf_counter()
    traced = trace_transformer(cfg, layout.tp, workload, batch, context,
                               cfg.layers // layout.pp if layout.pp > 1 else None, recompute,
                               sequence_parallel and workload == "prefill")
    trace_s = time.perf_counter() - started
    if attention is None:
        attention = mach.prefill_attention if workload == "prefill" else "flash"
    priced = price(traced, mach, layout, graph, weight_scale=weight_bytes / 2.0,
                   attention=attention)
    extra: dict = {}
    seconds = priced.seconds
    if workload == "train":
        extra["microbatches"] = microbatches
        # A pipeline of pp stages runs microbatches + pp - 1 stage slots (GPipe / 1F1B bubble),
        # sending each microbatch's activations to the next stage.
        slots = microbatches + layout.pp - 1
        stage = priced.seconds
        if layout.pp > 1:
            act = batch * context * cfg.hidden * 2
            stage += 2 * collective_s("all_gather", act * 2, 2, mach, lnc) / 2
        seconds = stage * slots
        extra["pipeline_bubble_s"] = stage * (layout.pp - 1)
        params = math.ceil(cfg.parameters / (layout.tp * layout.pp))
        grad_bytes = params * 2
        sync = 0.0
        if layout.fsdp > 1:  # all-gather parameters for forward and backward, scatter gradients
            sync += 2 * collective_s("all_gather", grad_bytes, layout.fsdp, mach, lnc)
            sync += collective_s("reduce_scatter", grad_bytes, layout.fsdp, mach, lnc)
        if layout.dp > 1:
            sync += collective_s("all_reduce", grad_bytes // layout.fsdp, layout.dp, mach, lnc)
        extra["gradient_sync_s"] = sync
        extra["optimizer_s"] = _optimizer_s(params // (layout.fsdp * layout.dp), mach, lnc)
        seconds += sync + extra["optimizer_s"]
    params = rank_parameters(cfg, layout.tp, cfg.layers // layout.pp)
    if workload == "train":
        # bf16 weights and gradients, fp32 master weights and two moments sharded over the
        # data-parallel and FSDP ranks (ZeRO-1 / FSDP); activations are not counted.
        rank_bytes = params * 4 // layout.fsdp + params * 12 // (layout.dp * layout.fsdp)
    else:
        rank_bytes = int(params * weight_bytes)
        if workload == "decode":
            rank_bytes += rank_cache_bytes(cfg, layout.tp, batch, context)
    hbm = mach.hbm_bytes_per_chip // mach.logical_cores_per_chip(lnc)
    return Prediction(model=cfg.name, machine=mach.name, layout=layout, workload=workload,
                      batch=batch, context=context, seconds=seconds, priced=priced, extra=extra,
                      trace_s=trace_s, ops=len(traced.ops), rank_bytes=rank_bytes,
                      hbm_bytes_per_rank=hbm)
