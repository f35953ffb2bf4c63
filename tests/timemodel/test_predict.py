"""The time model's fake-tensor path (torchneuron/timemodel/trace.py, predict.py, price.py): a
model far too large for this machine traced and priced at full size, a one-op trace priced by
hand, host stalls, and the errors a bad configuration raises."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

from torchneuron.runtime.profiles import MACHINES
from torchneuron.timemodel.collectives import collective_s
from torchneuron.timemodel import (CONFIGS, Layout, collective, engines, machine_named,
                                   mark_resident, predict, price, trace)
from torchneuron.timemodel.price import MATERIALIZED_BYTES_PER_SCORE, op_cost

TRN2 = MACHINES["trn2"]


def _memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_a_70b_model_that_cannot_be_allocated_here_is_traced_at_full_size():
    cfg = CONFIGS["llama-3-70b"]
    assert cfg.parameters * 2 > _memory_bytes(), "the case must not fit this machine"
    p = predict("llama-3-70b", "trn2", Layout(64, tp=64), "decode", 1, 4096)
    assert p.trace_s < 60
    # A decode step multiplies the token by every weight of the rank once (2 FLOPs each) and
    # attends over the cache (4 * context * head_dim per head). A rank holds 1 of the 64 query
    # heads, 1 KV head (8 KV heads replicated over 64 ranks), 28672 / 64 = 448 MLP columns and
    # ceil(128256 / 64) = 2004 rows of the vocabulary.
    layer = 2 * (8192 * 3 * 128 + 128 * 8192 + 3 * 8192 * 448) + 4 * 4096 * 128
    assert p.priced.flops == 80 * layer + 2 * 8192 * 2004
    # Two all-reduces per layer and one after the embedding, each of one token's hidden state.
    reduces = p.priced.by_op["collective:all_reduce:tp"]
    one = collective_s("all_reduce", cfg.hidden * 2, 64, TRN2, 2)
    assert reduces == pytest.approx((2 * cfg.layers + 1) * one)
    # Memory bound: the weights through HBM dominate the ops' time.
    assert p.priced.engines.dma > p.priced.engines.tensor
    assert 1e-3 < p.seconds < 1.0


def test_the_ranks_memory_is_its_share_of_weights_and_cache():
    from torchneuron.timemodel.transformer import RankModel, rank_parameters
    for name, tp in (("llama-2-13b", 32), ("llama-3-70b", 64), ("llama-2-7b", 1)):
        with torch.device("meta"):
            model = RankModel(CONFIGS[name], tp)
        assert rank_parameters(CONFIGS[name], tp) == sum(p.numel() for p in model.parameters())
    p = predict("llama-3-70b", "trn2", Layout(64, tp=64), "decode", 1, 4096)
    cache = 2 * 80 * 1 * 1 * 4096 * 128 * 2  # K and V, 80 layers, one KV head per rank
    assert p.rank_bytes == rank_parameters(CONFIGS["llama-3-70b"], 64) * 2 + cache
    assert p.hbm_bytes_per_rank == 96 * 2**30 // 4 and p.fits
    assert not predict("llama-3-70b", "trn2", Layout(1), "decode", 1, 16).fits


def test_training_traces_forward_and_backward_with_fsdp_and_data_parallel_sync():
    p = predict("llama-2-7b", "trn2", Layout(16, tp=4, fsdp=2), "train", 1, 512,
                microbatches=2)
    assert p.layout.dp == 2
    assert p.extra["gradient_sync_s"] > 0 and p.extra["optimizer_s"] > 0
    # Backward costs about twice the forward: a training pass has ~3x a forward's FLOPs.
    forward = predict("llama-2-7b", "trn2", Layout(4, tp=4), "prefill", 1, 512)
    assert p.priced.flops > 2.5 * forward.priced.flops * 0.9
    assert p.seconds > 2 * p.priced.seconds


def test_one_matmul_priced_by_hand():
    def build():
        return nn.Linear(4096, 4096, bias=False, dtype=torch.bfloat16)

    def run(layer):
        with torch.no_grad():
            collective("all_reduce", layer(torch.zeros(1, 4096, dtype=torch.bfloat16)))

    traced = trace(build, run)
    names = [op.name for op in traced.ops]
    assert "mm" in names and "collective" in names
    priced = price(traced, TRN2, Layout(4, tp=4), graph=True)
    # The weight (resident) crosses HBM; the token stays on chip in a compiled graph.
    weight = engines.dma_s(4096 * 4096 * 2, TRN2, 2)
    tensor = engines.tensor_engine_s(1, 4096, 4096, TRN2, 2)
    assert priced.compute_s == pytest.approx(max(weight, tensor))
    assert priced.launch_s == TRN2.graph_launch_s
    eager = price(traced, TRN2, Layout(4, tp=4), graph=False)
    assert eager.compute_s > priced.compute_s  # every op a kernel: launches, all operands


def test_host_fallbacks_and_syncs_are_stalls():
    def run(_):
        x = torch.zeros(1000, dtype=torch.float64)
        (x * 2).sum().item()

    traced = trace(lambda: None, run)
    priced = price(traced, TRN2, Layout(1))
    host_ops = [op for op in traced.ops if op.host]
    assert {op.name for op in host_ops} >= {"mul", "_local_scalar_dense"}
    expected = sum(TRN2.host_sync_s + (0 if op.name == "_local_scalar_dense" else
                   sum(o.nbytes for o in op.inputs + op.outputs) / TRN2.host_link_bandwidth)
                   for op in host_ops)
    assert priced.stall_s == pytest.approx(expected)


def test_the_h100_profile_prices_the_same_trace():
    trn2 = predict("llama-3-8b", "trn2", Layout(8, tp=8), "decode", 8, 2048)
    h100 = predict("llama-3-8b", "h100", Layout(8, tp=8), "decode", 8, 2048)
    assert h100.machine == "h100" and h100.priced.flops == trn2.priced.flops
    assert h100.seconds > 0


@pytest.mark.parametrize("make, message", [
    (lambda: machine_named("trn9"), "unknown machine profile 'trn9'"),
    (lambda: Layout(32, tp=3), r"tp=3 x pp=1 x fsdp=1 = 3 does not divide the 32 ranks"),
    (lambda: Layout(64, tp=8, fsdp=3), "does not divide the 64 ranks"),
    (lambda: Layout(0), "ranks=0: must be a positive integer"),
    (lambda: Layout(2, lnc=3), "a logical core is 1 or 2 physical cores"),
    (lambda: predict("llama-3-8b", "trn2", Layout(128, tp=128), "decode", 1, 16),
     "tp=128 spans instances"),
    (lambda: predict("llama-3-8b", "h100", Layout(2, lnc=2), "decode", 1, 16),
     "h100 has no logical cores"),
    (lambda: predict("gpt-5", "trn2", Layout(1), "decode", 1, 16), "unknown model 'gpt-5'"),
    (lambda: predict("llama-3-8b", "trn2", Layout(1), "serve", 1, 16),
     "unknown workload 'serve'"),
    (lambda: predict("llama-3-8b", "trn2", Layout(3, pp=3), "train", 1, 16),
     "pp=3 does not divide llama-3-8b's 32 layers"),
    (lambda: predict("llama-3-8b", "trn2", Layout(2, fsdp=2), "decode", 1, 16),
     "pp and fsdp layouts are for training"),
    (lambda: predict("llama-3-8b", "trn2", Layout(1), "decode", 0, 16), "must be positive"),
    (lambda: predict("llama-3-8b", "trn2", Layout(1), "prefill", 1, 16, attention="paged"),
     "unknown attention 'paged'"),
    (lambda: price(trace(lambda: None, lambda _: None), TRN2, Layout(1), attention="sparse"),
     "unknown attention 'sparse'"),
])
def test_bad_configurations_raise_clear_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_the_traced_flops_agree_with_pytorchs_flop_counter():
    # PyTorch's FlopCounterMode over the same fake step counts the matmuls as the trace does
    # (it has no formula for the CPU's fused attention, which the trace adds itself).
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    from torchneuron.timemodel import trace_transformer
    from torchneuron.timemodel.transformer import RankModel

    cfg = CONFIGS["llama-2-7b"]
    traced = trace_transformer(cfg, 4, "prefill", 2, 256)
    attention = sum(op.flops for op in traced.ops if "scaled_dot_product" in op.name)
    with FakeTensorMode():
        model = RankModel(cfg, 4)
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(torch.zeros(2, 256, dtype=torch.long), last_only=True)
    assert counter.get_total_flops() == traced.flops - attention
    assert attention == cfg.layers * 4 * 2 * 8 * 256 * 256 * 128  # 8 of 32 heads per rank


def test_narrow_weights_halve_the_weight_traffic_and_cost_a_cast():
    def run(layer):
        with torch.no_grad():
            layer(torch.zeros(1, 4096, dtype=torch.bfloat16))

    traced = trace(lambda: nn.Linear(4096, 4096, bias=False, dtype=torch.bfloat16), run)
    int8 = price(traced, TRN2, Layout(4, tp=4), weight_scale=0.5)
    assert int8.engines.dma == pytest.approx(engines.dma_s(4096 * 4096, TRN2, 2))
    assert int8.engines.vector == pytest.approx(
        engines.vector_engine_s(4096 * 4096, TRN2, 2, dtype=torch.int8))
    assert price(traced, TRN2, Layout(4, tp=4)).engines.vector == 0.0


def test_an_unchanged_hugging_face_model_prices_as_the_built_in_transformer():
    # transformers' LlamaForCausalLM at Llama-3-8B's full size, built and run as a user would,
    # under the trace: the same FLOPs as the time model's transformer, the same time within 1%.
    transformers = pytest.importorskip("transformers")
    cfg = CONFIGS["llama-3-8b"]
    hf_config = transformers.LlamaConfig(
        hidden_size=cfg.hidden, intermediate_size=cfg.intermediate, num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads, vocab_size=cfg.vocab)

    def build():
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            return transformers.LlamaForCausalLM(hf_config).eval()
        finally:
            torch.set_default_dtype(default)

    def run(model):
        with torch.no_grad():
            model(torch.zeros(1, 2048, dtype=torch.long), logits_to_keep=1)

    hf = price(trace(build, run), TRN2, Layout(1))
    ours = predict("llama-3-8b", "trn2", Layout(1), "prefill", 1, 2048).priced
    assert hf.flops == ours.flops
    assert hf.seconds == pytest.approx(ours.seconds, rel=0.01)


def test_a_cache_write_costs_its_source_and_other_in_place_ops_fuse():
    def run(_):
        cache = torch.empty(1, 8, 4096, 128, dtype=torch.bfloat16)
        mark_resident(cache)
        step = torch.ones(1, 8, 1, 128, dtype=torch.bfloat16)
        cache.index_copy_(2, torch.tensor([7]), step)
        step.mul_(2)

    traced = trace(lambda: None, run)
    (write,) = [op for op in traced.ops if op.name == "index_copy_"]
    (scale,) = [op for op in traced.ops if op.name == "mul_"]
    # The new K of one position (8 heads x 128), not the 4096-position cache.
    assert op_cost(write, TRN2, 2).dma == pytest.approx(engines.dma_s(8 * 128 * 2, TRN2, 2))
    assert op_cost(scale, TRN2, 2, graph=True).dma == 0.0
    assert op_cost(scale, TRN2, 2, graph=False).dma == pytest.approx(
        engines.dma_s(2 * 8 * 128 * 2, TRN2, 2))


def _causal_attention_op(heads: int, s: int, d: int = 128):
    def run(_):
        q = torch.empty(1, heads, s, d, dtype=torch.bfloat16)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)

    (op,) = [op for op in trace(lambda: None, run).ops if "scaled_dot_product" in op.name]
    return op


def test_materialized_attention_moves_every_score_through_hbm_by_hand():
    trn1 = MACHINES["trn1"]
    op = _causal_attention_op(heads=2, s=4096)
    cost = op_cost(op, trn1, 1, attention="materialized")
    # 2 heads x 4096 x 4096 float32 scores = 128 MiB, over trn1's 24 MiB of SBUF: each score
    # crosses HBM 52 bytes' worth (written, masked, five softmax passes, cast, read by P V), at
    # one NeuronCore's half of 820 GB/s and 60% efficiency (Q, K, V and the output, 2 MiB
    # each, stay on chip in a compiled graph).
    scores = 2 * 4096 * 4096
    assert MATERIALIZED_BYTES_PER_SCORE == 52
    assert cost.dma == pytest.approx(scores * 52 / (820e9 / 2) / 0.6)
    # Nothing skipped for the causal mask: both matmuls over the whole square. Q K^T: 4096 / 128
    # stationary tiles of one contraction tile, each 8 MultiplyMoving of 512 columns; P V: 32
    # contraction tiles of one stationary tile, 8 MultiplyMoving each; per head.
    cycles = 2 * (32 * 8 * 512 + 32 * 8 * 512)
    assert cost.tensor == pytest.approx(cycles / 2.8e9 / 0.9)
    # The Vector Engine: 9 input passes of 128 lanes at 1.12 GHz plus 6 instructions' overhead.
    assert cost.vector == pytest.approx((9 * scores / 128 + 6 * 100) / 1.12e9 / 0.9)
    assert cost.bound == "dma"
    # The flash kernel keeps the scores on chip and skips the masked half.
    flash = op_cost(op, trn1, 1)
    assert flash.dma == 0.0
    assert flash.tensor == pytest.approx(cost.tensor / 2)


def test_scores_that_fit_on_chip_stay_there_and_decode_is_unchanged():
    trn1 = MACHINES["trn1"]
    small = _causal_attention_op(heads=1, s=1024)  # 4 MiB of float32 scores < 24 MiB
    assert op_cost(small, trn1, 1, attention="materialized").dma == 0.0
    # Eager: Q, K, V, the output and its float32 log-sum-exp cross HBM, the scores still not.
    qkvo = 4 * 1024 * 128 * 2 + 1024 * 4
    assert op_cost(small, trn1, 1, graph=False, attention="materialized").dma == pytest.approx(
        qkvo / (820e9 / 2) / 0.6)
    p = {a: predict("llama-2-7b", "trn1", Layout(32, tp=32), "decode", 1, 4096, attention=a)
         for a in ("flash", "materialized")}
    assert p["flash"].seconds == p["materialized"].seconds


def test_each_machine_prefills_with_its_stacks_attention():
    assert MACHINES["trn1"].prefill_attention == "materialized"
    assert {MACHINES[m].prefill_attention for m in ("trn2", "trn3", "h100")} == {"flash"}
    default = predict("llama-2-7b", "trn1", Layout(32, tp=32), "prefill", 1, 4096)
    flash = predict("llama-2-7b", "trn1", Layout(32, tp=32), "prefill", 1, 4096,
                    attention="flash")
    assert default.seconds > flash.seconds
    # Training on trn1 (NxD Training's flash kernel) is not affected by the inference default.
    train = {a: predict("llama-2-7b", "trn1", Layout(32, tp=32), "train", 1, 2048,
                        attention=a).seconds for a in (None, "flash")}
    assert train[None] == train["flash"]
